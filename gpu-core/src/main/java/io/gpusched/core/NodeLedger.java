package io.gpusched.core;

import io.gpusched.core.LedgerException.Kind;
import io.gpusched.core.host.StateDirectory;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.FileLockInterruptionException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node ledger: the one record of a node's allocations, in a state directory shared by every process of the node
 * that schedules its GPUs (see {@link GpuScheduler.Builder#stateDir(Path)}).
 *
 * <p>On disk: {@code ledger}, an append-only text file whose first line is a header
 * {@code gpusched-ledger <format> <node prefix> <generation> <crc32c>}, followed by one record per line:
 * {@code <sequence> <crc32c of "<sequence> <json>", 8 hex digits> <json>}. Sequences increase by one; allocation ids
 * are {@code <node prefix>-<sequence>}, so they are unique across processes and restarts. {@code ledger.lock} is the
 * file whose exclusive {@code fcntl} lock (which the kernel drops when its holder dies) every change holds while it
 * catches up, decides, appends and forces. An incomplete last line (a write torn by a crash) is cut; a damaged
 * complete record is refused with its offset. A ledger grown past a threshold is compacted under the lock into a new
 * file (the next generation, starting with a snapshot record) renamed over the old one; every process checks the
 * file's identity under the lock and reloads from the new file, so nobody writes into a replaced file.
 *
 * <p>Only {@link #defaultStateDir()} is public; the rest is the scheduler's.
 *
 * <p>Why it is over 500 lines: the file format (header, record lines with CRC, torn tails), its locking (JVM and
 * {@code fcntl}, interrupt-safe channels), catch-up, compaction and the directory's security checks all act on the
 * same open file and offsets; naming them as parts of their own (codec, directory security, transaction,
 * compaction) is still to do (issue 22).
 */
final class NodeLedger {
    private static final Logger LOG = LoggerFactory.getLogger(NodeLedger.class);
    /** The format this version writes and reads. */
    static final int FORMAT = 1;
    static final String MAGIC = "gpusched-ledger";
    static final String FILE = "ledger";
    static final String LOCK = "ledger.lock";
    /** Compact once the file is this large (bytes) by default; system property {@code gpusched.ledger.compactBytes}. */
    static final long COMPACT_AT = 8L << 20;

    /** A record and its sequence. */
    record Entry(long seq, LedgerRecord record) {
    }

    /** The state after catching up, with the events of the records read. */
    record CaughtUp(NodeState state, List<AllocationEvent> events) {
    }

    /** One JVM-wide lock per state directory: fcntl locks are per process, so threads take this first. */
    private static final class DirLock {
        final ReentrantLock jvm = new ReentrantLock();
        /** Replaced (under {@link #jvm}) when an interrupt closed it: FileChannel is interruptible. */
        volatile FileChannel channel;
        /** Open NodeLedgers using it; guarded by LOCKS. The channel closes with the last (closing it drops locks). */
        int users;

        DirLock(FileChannel channel) {
            this.channel = channel;
        }

        /** Opens the lock file again after an interrupt closed the channel (holding no lock: closing dropped it). */
        void reopen(Path lockFile) throws IOException {
            if (!channel.isOpen()) {
                channel = FileChannel.open(lockFile, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
            }
        }
    }

    /** An operation on the ledger's channel, run again on a reopened channel when an interrupt closed it. */
    private interface ChannelOp<T> {
        T apply(FileChannel c) throws IOException;
    }

    /** How often an operation is retried after interrupts closed its channel before the change fails. */
    private static final int INTERRUPT_RETRIES = 100;

    private static final Map<Path, DirLock> LOCKS = new ConcurrentHashMap<>();

    private final Path dir;
    private final Path file;
    private final long compactAt;
    /** Null for a reader ({@link #reader}): it takes no lock. */
    private final DirLock dirLock;
    /** A reader opens the ledger file for reading only, takes no lock, and leaves a torn tail where it is. */
    private final boolean readOnly;
    private final List<String> warnings = new ArrayList<>();
    private FileChannel channel;
    private final AtomicLong forces = new AtomicLong();
    private final AtomicLong forceNanos = new AtomicLong();
    private final AtomicLong forceNanosMax = new AtomicLong();
    private final AtomicLong recordsWritten = new AtomicLong();
    private Object fileKey;
    /** An interrupt arrived during this transaction's I/O; the caller's flag is set again when it ends (jvm lock). */
    private boolean interruptedDuringIo;
    private long readOffset;
    private String prefix;
    private long generation;

    NodeLedger(Path dir) {
        this(dir, Long.getLong("gpusched.ledger.compactBytes", COMPACT_AT));
    }

    NodeLedger(Path dir, long compactAt) {
        this.dir = dir.toAbsolutePath().normalize();
        this.file = this.dir.resolve(FILE);
        this.compactAt = compactAt;
        this.readOnly = false;
        prepareDirectory(this.dir);
        Path lockFile = this.dir.resolve(LOCK);
        synchronized (LOCKS) {
            this.dirLock = LOCKS.computeIfAbsent(this.dir, d -> {
                try {
                    return new DirLock(FileChannel.open(lockFile, Set.of(StandardOpenOption.CREATE,
                            StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(
                            PosixFilePermissions.fromString("rw-r--r--"))));
                } catch (IOException e) {
                    throw io("cannot open the lock file " + lockFile, lockFile, e);
                }
            });
            dirLock.users++;
        }
        try {
            checkNotWritableByOthers(lockFile, "lock file");
        } catch (LedgerException e) {
            release();
            throw e;
        }
    }

    /** A reader: no directory created, no lock file, the ledger opened read-only; see {@link #read}. */
    private NodeLedger(Path dir, boolean readOnly) {
        this.dir = dir.toAbsolutePath().normalize();
        this.file = this.dir.resolve(FILE);
        this.compactAt = Long.MAX_VALUE;
        this.readOnly = readOnly;
        this.dirLock = null;
    }

    /** How often a reader reads again when the file changed under it (an append, a cut, a compaction). */
    static final int READ_TRIES = 5;

    /**
     * Reads the ledger of {@code dir} as it is, without the node's lock and without writing anything: for processes
     * that only learn which GPUs are whose (a YARN container, as another user than the ledger's writers). The file is
     * opened read-only, not through a symbolic link; a last line without its newline (a writer mid-append, or a crash)
     * is left unread; a damaged complete record is refused as {@link Kind#CORRUPT}, unless the file changed meanwhile
     * (then it is read again). Readers need only read access: the directory readable and searchable, the file readable.
     *
     * @param dir      the state directory
     * @param initial  the node's devices, nothing allocated
     * @param warnings receives what was left unread
     * @return the state the ledger records
     * @throws LedgerException {@code UNREADABLE}, {@code INSECURE_PERMISSIONS}, {@code CORRUPT}, {@code NEWER_FORMAT}
     */
    static NodeState read(Path dir, NodeState initial, List<String> warnings) {
        NodeLedger r = new NodeLedger(dir, true);
        r.checkForReader();
        LedgerException last = null;
        for (int tries = 0; tries < READ_TRIES; tries++) {
            Object before = r.identity();
            NodeState s;
            try {
                s = r.reload(initial, null, false);
            } catch (LedgerException e) {
                if (e.kind() != Kind.CORRUPT || Objects.equals(before, r.identity())) {
                    throw e;
                }
                last = e; // read while a writer cut a torn tail and appended: read again
                continue;
            } finally {
                r.closeChannel();
            }
            if (Objects.equals(before, r.identity()) || tries == READ_TRIES - 1) {
                synchronized (r.warnings) {
                    warnings.addAll(r.warnings);
                }
                return s;
            }
            synchronized (r.warnings) {
                r.warnings.clear(); // replaced or grown meanwhile: read the newer file
            }
        }
        throw last;
    }

    /** @return the file's identity and size, or null when it cannot be read */
    private Object identity() {
        try {
            BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            return List.of(String.valueOf(a.fileKey()), a.size(), a.lastModifiedTime().toMillis());
        } catch (IOException e) {
            return null;
        }
    }

    /**
     * A reader's checks: the directory exists and is writable by its owner only; the ledger is a regular file (not a
     * link), writable by its owner only, owned by the directory's owner, by root or by this process's user. Unlike a
     * writer, a reader may be another user than the directory's owner (a YARN container is never the NodeManager's
     * user): whoever owns the directory it was told to read is the one it trusts, and nobody else may have written.
     */
    private void checkForReader() {
        PosixFileAttributes d;
        try {
            d = Files.readAttributes(dir, PosixFileAttributes.class);
        } catch (NoSuchFileException e) {
            throw new LedgerException(Kind.UNREADABLE, dir, "the state directory " + dir + " does not exist: no"
                    + " process of this node has written a node ledger there; give the directory the node's writers"
                    + " use (GPUSCHED_STATE_DIR, --state-dir, gpusched.yarn.state-dir)", null);
        } catch (AccessDeniedException e) {
            throw denied(dir);
        } catch (UnsupportedOperationException e) {
            d = null;
        } catch (IOException e) {
            throw io("cannot read the state directory " + dir, dir, e);
        }
        if (d != null) {
            if (!d.isDirectory()) {
                throw new LedgerException(Kind.UNREADABLE, dir, "the state directory " + dir + " is not a directory;"
                        + " give the directory that holds the node ledger", null);
            }
            checkNotWritableByOthers(dir, d.permissions(), "state directory");
        }
        PosixFileAttributes f;
        try {
            f = Files.readAttributes(file, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            throw new LedgerException(Kind.UNREADABLE, file, "there is no node ledger " + file + ": no process of"
                    + " this node has allocated GPUs with this state directory; give the directory the node's writers"
                    + " use (GPUSCHED_STATE_DIR, --state-dir, gpusched.yarn.state-dir)", null);
        } catch (AccessDeniedException e) {
            throw denied(dir);
        } catch (UnsupportedOperationException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        if (!f.isRegularFile()) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, file, "the node ledger " + file + " is not a regular"
                    + " file (" + (f.isSymbolicLink() ? "a symbolic link" : "a directory, FIFO or device") + "); it is"
                    + " not read: a ledger is the regular file its writers create", null);
        }
        checkNotWritableByOthers(file, f.permissions(), "ledger");
        checkReaderOwner(file, dir, "node ledger");
    }

    /**
     * A reader's owner rule for a file of the state directory {@code dir}: owned by the directory's owner, by root, or
     * by this process's user (a writer's rule, {@link #checkNotWritableByOthers(Path, String)}, allows only the last
     * two).
     */
    static void checkReaderOwner(Path p, Path dir, String what) {
        int owner = uid(p);
        int dirOwner = uid(dir);
        int me = myUid();
        if (owner >= 0 && owner != 0 && owner != me && owner != dirOwner) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is owned by uid "
                    + owner + ", neither the owner of its directory (uid " + dirOwner + ") nor root; another user may"
                    + " have written it, so it is not read: run chown " + dirOwner + " " + p, null);
        }
    }

    /** A reader's checks of a file of the state directory {@code dir}: writable by its owner only, owned as above. */
    static void checkForReader(Path p, Path dir, String what) {
        try {
            checkNotWritableByOthers(p, Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS), what);
        } catch (UnsupportedOperationException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        checkReaderOwner(p, dir, what);
    }

    /** @return the owner of {@code p} (not following a link), or -1 where the file system does not say */
    private static int uid(Path p) {
        try {
            return (Integer) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return -1;
        }
    }

    /** @return this process's user ({@code /proc/self} is a link to a directory the process owns), or -1 */
    private static int myUid() {
        try {
            return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
            return -1;
        }
    }

    private LedgerException denied(Path p) {
        int me = myUid();
        return new LedgerException(Kind.UNREADABLE, p, "cannot read the node ledger " + file + " as uid " + me
                + ": permission denied; readers need the state directory readable and searchable and the ledger"
                + " readable (writers keep them writable by their owner only): chmod 0755 " + dir + " and chmod 0644 "
                + file + ", or give the readers' group access (chgrp <group> " + dir + " " + file + "; chmod 0750 "
                + dir + "; chmod 0640 " + file + ")", null);
    }

    /**
     * The base state directory of this process: {@code $GPUSCHED_STATE_DIR}, else {@code /var/lib/gpusched} for root,
     * else {@code $XDG_STATE_HOME/gpusched}, else {@code ~/.local/state/gpusched}.
     *
     * @return the base state directory
     * @deprecated use {@link io.gpusched.core.host.StateDirectory}, which also places simulated nodes apart
     */
    @Deprecated
    static Path defaultStateDir() {
        return StateDirectory.base();
    }

    /**
     * @param root          whether the user is root
     * @param xdgStateHome  {@code $XDG_STATE_HOME}, or null
     * @param home          the user's home directory
     * @return the default state directory for such a user
     * @deprecated use {@link io.gpusched.core.host.StateDirectory#userDefault}
     */
    @Deprecated
    static Path defaultStateDir(boolean root, String xdgStateHome, String home) {
        return StateDirectory.userDefault(root, xdgStateHome,
                Path.of(Objects.requireNonNull(home, "home")));
    }

    /** @return the state directory */
    Path directory() {
        return dir;
    }

    /** @return the ledger file */
    Path path() {
        return file;
    }

    /** @return the node's id prefix */
    String prefix() {
        return prefix;
    }

    /** @return appends forced to disk so far (each may hold many records: group commit) */
    /** @return what this process has written and forced so far */
    LedgerStatistics statistics() {
        return new LedgerStatistics(file, forces.get(), recordsWritten.get(), forceNanos.get(), forceNanosMax.get());
    }

    long forces() {
        return forces.get();
    }

    /** @return what opening or catching up had to repair (cut torn tails) */
    List<String> warnings() {
        synchronized (warnings) {
            return List.copyOf(warnings);
        }
    }

    /**
     * Cheap check whether anything may have changed since the last call (size and identity of the file), for
     * waiters polling without the lock.
     */
    Object stamp() {
        try {
            BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
            return List.of(a.size(), String.valueOf(a.fileKey()), a.lastModifiedTime().toMillis());
        } catch (IOException e) {
            return List.of(-1L);
        }
    }

    // ------------------------------------------------------------------ directory and permissions

    private static void prepareDirectory(Path dir) {
        if (!Files.isDirectory(dir)) {
            try {
                Path first = dir; // the outermost directory this call creates
                while (first.getParent() != null && !Files.exists(first.getParent())) {
                    first = first.getParent();
                }
                Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwxr-xr-x")));
                // the umask may have narrowed the modes: readers (a YARN container's user) need to reach the ledger
                for (Path p = dir; p != null && p.startsWith(first); p = p.getParent()) {
                    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
                }
            } catch (IOException e) {
                throw io("cannot create the state directory " + dir, dir, e);
            }
        }
        checkNotWritableByOthers(dir, "state directory");
    }

    static void checkNotWritableByOthers(Path p, String what) {
        Set<PosixFilePermission> perms;
        try {
            perms = Files.getPosixFilePermissions(p);
        } catch (UnsupportedOperationException e) {
            return;
        } catch (NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the permissions of " + p, p, e);
        }
        checkNotWritableByOthers(p, perms, what);
        checkOwner(p, what);
    }

    /** @throws LedgerException {@code INSECURE_PERMISSIONS} when {@code perms} let its group or others write */
    private static void checkNotWritableByOthers(Path p, Set<PosixFilePermission> perms, String what) {
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            String mode = PosixFilePermissions.toString(perms);
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is writable by "
                    + (perms.contains(PosixFilePermission.OTHERS_WRITE) ? "other users" : "its group") + " (mode "
                    + mode + "); the node ledger decides who gets which GPU, so it must be writable by its owner only:"
                    + " run chmod go-w " + p, null);
        }
    }

    /** The owner of a ledger path must be this process's user or root: any other owner may rewrite it. */
    private static void checkOwner(Path p, String what) {
        int owner;
        int me;
        try {
            owner = (Integer) Files.getAttribute(p, "unix:uid");
            me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        } catch (UnsupportedOperationException | IllegalArgumentException | NoSuchFileException e) {
            return;
        } catch (IOException e) {
            throw io("cannot read the owner of " + p, p, e);
        }
        if (owner != me && owner != 0) {
            throw new LedgerException(Kind.INSECURE_PERMISSIONS, p, "the " + what + " " + p + " is owned by uid "
                    + owner + ", another user than this process's (uid " + me + "); the node ledger decides who gets"
                    + " which GPU, so it must be owned by the user running gpusched or by root: run chown " + me + " "
                    + p, null);
        }
    }

    // ------------------------------------------------------------------ transactions

    /** Opens (creating when absent) and loads the ledger into {@code initial}, under the lock. */
    NodeState open(NodeState initial, List<AllocationEvent> events) {
        NodeState[] out = {initial};
        withLock(() -> {
            if (!Files.exists(file)) {
                byte[] rnd = new byte[3];
                new SecureRandom().nextBytes(rnd);
                String p = String.format(Locale.ROOT, "a%02x%02x%02x", rnd[0], rnd[1], rnd[2]);
                writeFresh(p, 1, null);
            }
            checkNotWritableByOthers(file, "ledger");
            out[0] = reload(initial, events, false);
            maybeCompact(out[0]);
        });
        return out[0];
    }

    /**
     * Takes the locks, catches {@code current} up with the file, runs {@code body} (which decides and calls
     * {@link #append}), compacts if the file has grown past the threshold, and unlocks.
     */
    void transaction(NodeState current, Function<CaughtUp, NodeState> body) {
        withLock(() -> {
            List<AllocationEvent> events = new ArrayList<>();
            NodeState s = catchUp(current, events);
            NodeState after = body.apply(new CaughtUp(s, events));
            maybeCompact(after);
        });
    }

    /** Runs {@code r} holding this process's and the node's lock (see {@link NodeIdentity}). */
    void underLock(Runnable r) {
        withLock(r);
    }

    /**
     * Runs {@code r} holding the JVM's and the node's lock. The caller's interrupt flag is cleared for the duration
     * and set again afterwards (with any interrupt that arrived meanwhile): the channels are interruptible, and an
     * interrupted operation would close them for every thread of the JVM and leave a change half done. An operation
     * an interrupt still closed is run again on a reopened channel ({@link #onChannel}), so a transaction is whole.
     */
    private void withLock(Runnable r) {
        if (readOnly) {
            throw new IllegalStateException("a reader of " + file + " takes no lock and changes nothing");
        }
        boolean interrupted = Thread.interrupted();
        dirLock.jvm.lock();
        try {
            FileLock fl = lockNode();
            try {
                r.run();
            } finally {
                try {
                    fl.release();
                } catch (IOException e) { // a channel closed by an interrupt has dropped the lock already
                    LOG.debug("releasing the lock on {}: {}", dir.resolve(LOCK), e.toString());
                }
            }
        } finally {
            interrupted |= interruptedDuringIo | Thread.interrupted();
            interruptedDuringIo = false;
            dirLock.jvm.unlock();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private FileLock lockNode() {
        Path lockFile = dir.resolve(LOCK);
        for (int tries = 0; ; tries++) {
            try {
                dirLock.reopen(lockFile);
                return dirLock.channel.lock();
            } catch (ClosedChannelException | FileLockInterruptionException e) {
                interruptedDuringIo |= Thread.interrupted();
                if (tries >= INTERRUPT_RETRIES) {
                    throw io("cannot lock " + lockFile + " (interrupted " + tries + " times)", lockFile, e);
                }
            } catch (IOException e) {
                throw io("cannot lock " + lockFile, lockFile, e);
            }
        }
    }

    /** Runs {@code op} on the ledger's channel; reopens the same file and runs it again when an interrupt closed it. */
    private <T> T onChannel(ChannelOp<T> op) throws IOException {
        for (int tries = 0; ; tries++) {
            try {
                return op.apply(channel);
            } catch (ClosedChannelException e) {
                interruptedDuringIo |= Thread.interrupted();
                if (tries >= INTERRUPT_RETRIES || channel == null) {
                    throw e;
                }
                // the node's lock is held (its own channel), so nobody replaces the file meanwhile; a reader holds
                // none, and compares the file's identity before and after (see read)
                channel = openFile();
            }
        }
    }

    /** @return the ledger file opened for reading and writing, or for reading only (not through a link) by a reader */
    private FileChannel openFile() throws IOException {
        return readOnly ? FileChannel.open(file, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)
                : FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
    }

    private NodeState catchUp(NodeState current, List<AllocationEvent> events) {
        Object key;
        try {
            key = Files.readAttributes(file, BasicFileAttributes.class).fileKey();
        } catch (IOException e) {
            throw io("the node ledger " + file + " cannot be read (was it removed?)", file, e);
        }
        long size;
        try {
            size = onChannel(FileChannel::size);
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        if (!Objects.equals(key, fileKey) || size < readOffset) {
            return reload(current, events, true);
        }
        if (size > readOffset) {
            scan(current, readOffset, size, events);
        }
        return current;
    }

    /**
     * Reads the whole file into a state with {@code like}'s devices; events describe the difference to {@code like}.
     */
    private NodeState reload(NodeState like, List<AllocationEvent> events, boolean diff) {
        closeChannel();
        try {
            channel = openFile();
            fileKey = Files.readAttributes(file, BasicFileAttributes.class).fileKey();
        } catch (AccessDeniedException e) {
            throw readOnly ? denied(file) : io("cannot open the node ledger " + file, file, e);
        } catch (IOException e) {
            throw io("cannot open the node ledger " + file, file, e);
        }
        long start = readHeader();
        NodeState fresh = like.emptied();
        fresh.sequence = -1;
        long size;
        try {
            size = onChannel(FileChannel::size);
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        readOffset = start;
        scan(fresh, start, size, null);
        if (fresh.sequence < 0) {
            fresh.sequence = 0;
        }
        if (diff) {
            diffEvents(like, fresh, events);
        }
        return fresh;
    }

    private static void diffEvents(NodeState before, NodeState after, List<AllocationEvent> events) {
        Instant now = Instant.now();
        for (Allocation a : before.live.values()) {
            if (!after.live.containsKey(a.id())) {
                events.add(new AllocationEvent(AllocationEvent.Type.RELEASED, now, Optional.of(a.id()), a.owner(),
                        a.request().jobId(), a.deviceUuids(), Optional.empty(), a.request().describe()
                        + " (released by another process)"));
            }
        }
        for (Allocation a : after.live.values()) {
            if (!before.live.containsKey(a.id())) {
                events.add(new AllocationEvent(AllocationEvent.Type.ALLOCATED, a.createdAt(), Optional.of(a.id()),
                        a.owner(), a.request().jobId(), a.deviceUuids(), Optional.empty(), a.request().describe()));
            }
        }
    }

    /** @return the offset after the header */
    private long readHeader() {
        ByteBuffer b = ByteBuffer.allocate(512);
        try {
            onChannel(c -> c.read(b, 0));
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        byte[] bytes = Arrays.copyOf(b.array(), b.position());
        int nl = indexOf(bytes, 0, bytes.length, (byte) '\n');
        String head = new String(bytes, 0, nl < 0 ? bytes.length : nl, StandardCharsets.ISO_8859_1);
        String[] f = head.split(" ", -1);
        if (f.length < 2 || !f[0].equals(MAGIC)) {
            throw new LedgerException(Kind.CORRUPT, file, file + " is not a gpusched node ledger (its first line"
                    + " does not start with \"" + MAGIC + " <format>\"); move it away or point gpu.state_dir elsewhere",
                    null);
        }
        int format;
        try {
            format = Integer.parseInt(f[1]);
        } catch (NumberFormatException e) {
            format = -1;
        }
        if (format > FORMAT) {
            throw new LedgerException(Kind.NEWER_FORMAT, file, "the node ledger " + file + " was written in format "
                    + format + " by a newer gpusched; this one reads format " + FORMAT + " and will not guess: upgrade"
                    + " every gpusched on this node, or use another state directory", null);
        }
        if (format < 1 || nl < 0 || f.length != 5
                || !f[4].equals(crcHex(f[0] + " " + f[1] + " " + f[2] + " " + f[3]))) {
            throw new LedgerException(Kind.CORRUPT, file, "the header of the node ledger " + file + " is damaged"
                    + " (offset 0: \"" + head.replaceAll("[^ -~]", "?") + "\"); restore the file or move it away",
                    null);
        }
        prefix = f[2];
        try {
            generation = Long.parseLong(f[3]);
        } catch (NumberFormatException e) {
            throw new LedgerException(Kind.CORRUPT, file, "the header of " + file + " has no generation", e);
        }
        return nl + 1;
    }

    /** Applies every complete record in [from, to) to {@code s}; cuts an incomplete last line. */
    private void scan(NodeState s, long from, long to, List<AllocationEvent> events) {
        int len = (int) Math.min(Integer.MAX_VALUE - 16, to - from);
        ByteBuffer buf = ByteBuffer.allocate(len);
        try {
            while (buf.hasRemaining()) {
                int n = onChannel(c -> c.read(buf, from + buf.position()));
                if (n < 0) {
                    break;
                }
            }
        } catch (IOException e) {
            throw io("cannot read " + file, file, e);
        }
        byte[] b = buf.array();
        int end = buf.position();
        int pos = 0;
        var decoder = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT);
        while (pos < end) {
            int nl = indexOf(b, pos, end, (byte) '\n');
            if (nl < 0 && readOnly) {
                String w = "the node ledger " + file + " ends with an incomplete record at offset " + (from + pos)
                        + " (" + (end - pos) + " bytes: a write in progress, or one cut short by a crash); not read";
                LOG.debug(w);
                synchronized (warnings) {
                    warnings.add(w);
                }
                break;
            }
            if (nl < 0) {
                long at = from + pos;
                String w = "the node ledger " + file + " ended with an incomplete record at offset " + at + " ("
                        + (end - pos) + " bytes, a write cut short by a crash); it was cut off";
                LOG.warn(w);
                synchronized (warnings) {
                    warnings.add(w);
                }
                try {
                    onChannel(c -> c.truncate(at));
                    onChannel(c -> {
                        c.force(false);
                        return null;
                    });
                } catch (IOException e) {
                    throw io("cannot cut the incomplete record off " + file, file, e);
                }
                break;
            }
            long at = from + pos;
            int sp1 = indexOf(b, pos, nl, (byte) ' ');
            int sp2 = sp1 < 0 ? -1 : indexOf(b, sp1 + 1, nl, (byte) ' ');
            if (sp2 < 0) {
                throw corrupt(at, s.sequence, "not a record (no \"<sequence> <checksum> <json>\")");
            }
            long seq;
            long crc;
            try {
                seq = Long.parseLong(new String(b, pos, sp1 - pos, StandardCharsets.ISO_8859_1));
                crc = Long.parseLong(new String(b, sp1 + 1, sp2 - sp1 - 1, StandardCharsets.ISO_8859_1), 16);
            } catch (NumberFormatException e) {
                throw corrupt(at, s.sequence, "unreadable sequence or checksum");
            }
            CRC32C c = new CRC32C();
            c.update(b, pos, sp1 - pos);
            c.update(' ');
            c.update(b, sp2 + 1, nl - sp2 - 1);
            if (c.getValue() != crc) {
                throw corrupt(at, s.sequence, "checksum mismatch");
            }
            String json;
            try {
                json = decoder.decode(ByteBuffer.wrap(b, sp2 + 1, nl - sp2 - 1)).toString();
            } catch (CharacterCodingException e) {
                throw corrupt(at, s.sequence, "not UTF-8");
            }
            LedgerRecord r;
            try {
                r = LedgerRecord.fromJson(json);
            } catch (RuntimeException e) {
                throw corrupt(at, s.sequence, e.getMessage());
            }
            boolean first = s.sequence < 0;
            if (first ? !(r instanceof LedgerRecord.Snapshot) && seq != 1 : seq != s.sequence + 1) {
                throw corrupt(at, s.sequence, "sequence " + seq + " where " + (first ? 1 : s.sequence + 1)
                        + " was expected");
            }
            if (first) {
                s.sequence = 0;
            }
            s.apply(seq, r, events);
            pos = nl + 1;
            readOffset = from + pos;
        }
    }

    private LedgerException corrupt(long offset, long after, String what) {
        return new LedgerException(Kind.CORRUPT, file, "the node ledger " + file + " is damaged at offset " + offset
                + (after > 0 ? " (the record after sequence " + after + ")" : "") + ": " + what + "; the records"
                + " after it cannot be trusted, so it is not opened: restore it from a backup, or move it away to"
                + " start with no allocations", null);
    }

    /** Appends the records and forces them to disk; on failure the file is cut back to where it was. */
    void append(List<Entry> entries) {
        if (entries.isEmpty()) {
            return;
        }
        StringBuilder sb = new StringBuilder(entries.size() * 256);
        for (Entry e : entries) {
            line(sb, e.seq(), LedgerRecord.toJson(e.record()));
        }
        ByteBuffer buf = ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.UTF_8));
        long start = readOffset;
        try {
            while (buf.hasRemaining()) { // positional: a write run again on a reopened channel goes on where it was
                onChannel(c -> c.write(buf, start + buf.position()));
            }
            long t0 = System.nanoTime();
            onChannel(c -> { // fsync is per file: forcing through a reopened channel forces what was written
                c.force(false);
                return null;
            });
            long took = System.nanoTime() - t0;
            forceNanos.addAndGet(took);
            forceNanosMax.accumulateAndGet(took, Math::max);
            recordsWritten.addAndGet(entries.size());
            forces.incrementAndGet();
        } catch (IOException e) {
            try {
                onChannel(c -> c.truncate(start));
                onChannel(c -> {
                    c.force(false);
                    return null;
                });
            } catch (IOException again) {
                e.addSuppressed(again);
            }
            boolean full = String.valueOf(e.getMessage()).contains("No space left");
            throw new LedgerException(full ? Kind.NO_SPACE : Kind.IO, file, (full ? "the disk holding the node"
                    + " ledger " + file + " is full" : "writing the node ledger " + file + " failed: " + e.getMessage())
                    + "; the change was not made (" + entries.size() + " record(s) not written)", e);
        }
        readOffset = start + buf.limit();
    }

    static void line(StringBuilder sb, long seq, String json) {
        String s = Long.toString(seq);
        sb.append(s).append(' ').append(crcHex(s + " " + json)).append(' ').append(json).append('\n');
    }

    static String crcHex(String text) {
        CRC32C c = new CRC32C();
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return String.format(Locale.ROOT, "%08x", c.getValue());
    }

    private void maybeCompact(NodeState s) {
        if (readOffset < compactAt) {
            return;
        }
        try {
            writeFresh(prefix, generation + 1, s);
            reloadAfterCompaction();
        } catch (LedgerException e) {
            LOG.warn("compacting {} failed; it keeps growing until the next try: {}", file, e.getMessage());
        }
    }

    private void reloadAfterCompaction() {
        closeChannel();
        try {
            channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            fileKey = Files.readAttributes(file, BasicFileAttributes.class).fileKey();
            readOffset = channel.size();
        } catch (IOException e) {
            throw io("cannot open the node ledger " + file, file, e);
        }
        readHeader();
    }

    /** Writes a new ledger file (header, then the state as one snapshot record) and renames it over the old. */
    private void writeFresh(String p, long gen, NodeState s) {
        Path tmp = dir.resolve(FILE + ".new");
        StringBuilder sb = new StringBuilder();
        String head = MAGIC + " " + FORMAT + " " + p + " " + gen;
        sb.append(head).append(' ').append(crcHex(head)).append('\n');
        if (s != null) {
            line(sb, s.sequence, LedgerRecord.toJson(s.toSnapshot()));
        }
        try (FileChannel c = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rw-r--r--")))) {
            ByteBuffer b = ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.UTF_8));
            while (b.hasRemaining()) {
                c.write(b);
            }
            c.force(true);
            // the umask may have narrowed the mode: readers (a YARN container's user) need to read the ledger
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // best effort
            }
            boolean full = String.valueOf(e.getMessage()).contains("No space left");
            throw new LedgerException(full ? Kind.NO_SPACE : Kind.IO, tmp, "cannot write " + tmp + ": "
                    + e.getMessage(), e);
        }
        try {
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException ignored) {
                // some file systems cannot sync a directory
            }
        } catch (IOException e) {
            throw io("cannot rename " + tmp + " to " + file, file, e);
        }
    }

    private static int indexOf(byte[] b, int from, int to, byte x) {
        for (int i = from; i < to; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }

    private static LedgerException io(String what, Path p, IOException e) {
        boolean full = String.valueOf(e.getMessage()).contains("No space left");
        return new LedgerException(full ? Kind.NO_SPACE : Kind.IO, p, what + ": " + e, e);
    }

    private void closeChannel() {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // nothing left to do
            }
            channel = null;
        }
    }

    /** Closes the ledger file, and the lock file when no other ledger of this JVM uses the directory. */
    void close() {
        dirLock.jvm.lock();
        try {
            closeChannel();
        } finally {
            dirLock.jvm.unlock();
        }
        release();
    }

    private void release() {
        synchronized (LOCKS) {
            if (--dirLock.users == 0) {
                LOCKS.remove(dir);
                try {
                    dirLock.channel.close();
                } catch (IOException ignored) {
                    // nothing left to do
                }
            }
        }
    }

    @Override
    public String toString() {
        return "NodeLedger[" + file + ", prefix " + prefix + ", generation " + generation + "]";
    }
}
