package io.gpusched.core;

import static io.gpusched.core.LedgerException.io;

import io.gpusched.core.LedgerException.Kind;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node ledger file: the one record of a node's allocations, in a state directory shared by every process of the
 * node that schedules its GPUs (see {@link GpuScheduler.Builder#stateDir(Path)}). Opens it, catches a state up with
 * what other processes appended, appends and forces records under the node's lock, and reads it for readers that take
 * no lock.
 *
 * <p>On disk: {@code ledger}, an append-only text file in {@link LedgerCodec}'s format (a header, then one record per
 * line, each with its CRC). Sequences increase by one; allocation ids are {@code <node prefix>-<sequence>}, so they
 * are unique across processes and restarts. {@code ledger.lock} is the file whose exclusive {@code fcntl} lock
 * ({@link NodeLock}) every change holds while it catches up, decides, appends and forces. An incomplete last line (a
 * write torn by a crash) is cut; a damaged complete record is refused with its offset. A ledger grown past a threshold
 * is compacted under the lock into a new file ({@link LedgerCompaction}) renamed over the old one; every process
 * checks the file's identity under the lock and reloads from the new file, so nobody writes into a replaced file.
 * Who may have written the directory and its files is {@link LedgerDirectorySecurity}'s to check.
 *
 * <p>Why it is about 500 lines: opening (four ways a file found there is refused), catching up and the torn-tail
 * rule, the append with its rollback, and the lock-free reads for readers share the file's identity and position
 * fields; the codec, the lock, compaction and directory security are types of their own.
 */
final class LedgerFile {
    private static final Logger LOG = LoggerFactory.getLogger(LedgerFile.class);
    static final String FILE = "ledger";

    /** The state after catching up, with the events of the records read. */
    record CaughtUp(NodeState state, List<AllocationEvent> events) {
    }

    /** An operation on the ledger's channel, run again on a reopened channel when an interrupt closed it. */
    private interface ChannelOp<T> {
        T apply(FileChannel c) throws IOException;
    }

    private final Path dir;
    private final Path file;
    private final long compactAt;
    /** The group that may share the directory with its owner ({@link StateGroup}). */
    private final StateGroup group;
    /** Null for a reader ({@link #read}): it takes no lock. */
    private final NodeLock lock;
    /** A reader opens the ledger file for reading only, takes no lock, and leaves a torn tail where it is. */
    private final boolean readOnly;
    private final List<String> warnings = new ArrayList<>();
    private FileChannel channel;
    private final AtomicLong forces = new AtomicLong();
    private final AtomicLong forceNanos = new AtomicLong();
    private final AtomicLong forceNanosMax = new AtomicLong();
    private final AtomicLong recordsWritten = new AtomicLong();
    private Object fileKey;
    private long readOffset;
    private String prefix;
    private long generation;

    LedgerFile(Path dir) {
        this(dir, LedgerCompaction.threshold(), StateGroup.of(Optional.empty()));
    }

    LedgerFile(Path dir, long compactAt) {
        this(dir, compactAt, StateGroup.of(Optional.empty()));
    }

    LedgerFile(Path dir, long compactAt, StateGroup group) {
        this.dir = StateDirectoryShape.forWriter(dir);
        this.file = this.dir.resolve(FILE);
        this.compactAt = compactAt;
        this.group = group;
        this.readOnly = false;
        Path given = dir.toAbsolutePath().normalize();
        try {
            LedgerDirectorySecurity.prepareDirectory(this.dir, group);
            this.lock = new NodeLock(this.dir, group);
        } catch (LedgerException e) {
            if (given.equals(this.dir)) {
                throw e;
            }
            throw new LedgerException(e.kind(), given, "the state directory " + given + " is a symbolic link to "
                    + this.dir + ": " + e.getMessage(), e.getCause());
        }
    }

    /** A reader: no directory created, no lock file, the ledger opened read-only; see {@link #read}. */
    private LedgerFile(Path dir, boolean readOnly) {
        this.dir = dir.toAbsolutePath().normalize();
        this.file = this.dir.resolve(FILE);
        this.compactAt = Long.MAX_VALUE;
        this.group = StateGroup.of(Optional.empty());
        this.readOnly = readOnly;
        this.lock = null;
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
        LedgerFile r = new LedgerFile(dir, true);
        LedgerDirectorySecurity.checkForReader(r.dir, r.file, r.group);
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

    /** @return the state directory */
    Path directory() {
        return dir;
    }

    /** @return the ledger file */
    Path path() {
        return file;
    }

    /** @return the group that may share the directory ({@link StateGroup#NONE} when none is configured) */
    StateGroup group() {
        return group;
    }

    /** @return the node's id prefix */
    String prefix() {
        return prefix;
    }

    /** @return what this process has written and forced so far */
    LedgerStatistics statistics() {
        return new LedgerStatistics(file, forces.get(), recordsWritten.get(), forceNanos.get(), forceNanosMax.get());
    }

    /** @return appends forced to disk so far (each may hold many records: group commit) */
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

    /** Opens (creating when absent) and loads the ledger into {@code initial}, under the lock. */
    NodeState open(NodeState initial, List<AllocationEvent> events) {
        NodeState[] out = {initial};
        withLock(() -> {
            if (!Files.exists(file)) {
                byte[] rnd = new byte[3];
                new SecureRandom().nextBytes(rnd);
                String p = String.format(Locale.ROOT, "a%02x%02x%02x", rnd[0], rnd[1], rnd[2]);
                LedgerCompaction.writeGeneration(dir, file, p, 1, null, group);
            }
            LedgerDirectorySecurity.checkFile(file, "ledger", group);
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
     * Runs {@code r} holding the JVM's and the node's lock ({@link NodeLock#run}). An operation an interrupt closed
     * is run again on a reopened channel ({@link #onChannel}), so a transaction is whole.
     */
    private void withLock(Runnable r) {
        if (readOnly) {
            throw new IllegalStateException("a reader of " + file + " takes no lock and changes nothing");
        }
        lock.run(r);
    }

    /** Runs {@code op} on the ledger's channel; reopens the same file and runs it again when an interrupt closed it. */
    private <T> T onChannel(ChannelOp<T> op) throws IOException {
        for (int tries = 0;; tries++) {
            try {
                return op.apply(channel);
            } catch (ClosedChannelException e) {
                boolean interrupted = Thread.interrupted();
                if (lock != null) {
                    lock.interruptedDuringIo(interrupted);
                }
                if (tries >= NodeLock.INTERRUPT_RETRIES || channel == null) {
                    throw e;
                }
                // the node's lock is held (its own channel), so nobody replaces the file meanwhile; a reader holds
                // none, and compares the file's identity before and after (see read)
                channel = openFile();
            }
        }
    }

    /**
     * @return the ledger file opened for reading and writing, or for reading only by a reader; never through a link
     *         (one planted in its place fails to open), and a writer's only when it is a regular file with one link
     *         (checked after the open: see {@link LedgerDirectorySecurity#checkFile})
     */
    private FileChannel openFile() throws IOException {
        if (readOnly) {
            return FileChannel.open(file, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS);
        }
        FileChannel c = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS);
        try {
            LedgerDirectorySecurity.checkFile(file, "ledger", group);
        } catch (LedgerException e) {
            c.close();
            throw e;
        }
        return c;
    }

    private NodeState catchUp(NodeState current, List<AllocationEvent> events) {
        Object key;
        try {
            key = Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
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
        if (!readOnly) { // a link, FIFO or linked file planted in the ledger's place: a typed refusal, not an I/O error
            LedgerDirectorySecurity.checkFile(file, "ledger", group);
        }
        try {
            channel = openFile();
            fileKey = Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
        } catch (AccessDeniedException e) {
            throw readOnly ? LedgerDirectorySecurity.denied(file, dir, file)
                    : io("cannot open the node ledger " + file, file, e);
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
        LedgerCodec.Header h = LedgerCodec.header(file, Arrays.copyOf(b.array(), b.position()));
        prefix = h.prefix();
        generation = h.generation();
        return h.length();
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
            int nl = LedgerCodec.indexOf(b, pos, end, (byte) '\n');
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
            LedgerCodec.Entry line = LedgerCodec.decode(file, b, pos, nl, at, s.sequence, decoder);
            long seq = line.seq();
            LedgerRecord r = line.record();
            boolean first = s.sequence < 0;
            if (first ? !(r instanceof LedgerRecord.Snapshot) && seq != 1 : seq != s.sequence + 1) {
                throw LedgerCodec.corrupt(file, at, s.sequence, "sequence " + seq + " where "
                        + (first ? 1 : s.sequence + 1) + " was expected");
            }
            if (first) {
                s.sequence = 0;
            }
            s.apply(seq, r, events);
            pos = nl + 1;
            readOffset = from + pos;
        }
    }

    /** Appends the records and forces them to disk; on failure the file is cut back to where it was. */
    void append(List<LedgerCodec.Entry> entries) {
        if (entries.isEmpty()) {
            return;
        }
        ByteBuffer buf = ByteBuffer.wrap(LedgerCodec.encode(entries));
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

    private void maybeCompact(NodeState s) {
        if (readOffset < compactAt) {
            return;
        }
        try {
            LedgerCompaction.writeGeneration(dir, file, prefix, generation + 1, s, group);
            reloadAfterCompaction();
        } catch (LedgerException e) {
            LOG.warn("compacting {} failed; it keeps growing until the next try: {}", file, e.getMessage());
        }
    }

    private void reloadAfterCompaction() {
        closeChannel();
        try {
            channel = openFile();
            fileKey = Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
            readOffset = channel.size();
        } catch (IOException e) {
            throw io("cannot open the node ledger " + file, file, e);
        }
        readHeader();
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
        lock.close(this::closeChannel);
    }

    @Override
    public String toString() {
        return "LedgerFile[" + file + ", prefix " + prefix + ", generation " + generation + "]";
    }
}
