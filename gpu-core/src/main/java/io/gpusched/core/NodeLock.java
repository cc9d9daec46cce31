package io.gpusched.core;

import static io.gpusched.core.LedgerException.io;

import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.FileLockInterruptionException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's lock on a state directory: a JVM-wide lock per directory (fcntl locks are per process, so this
 * process's threads take it first), then the exclusive {@code fcntl} lock on {@code ledger.lock}, which the kernel
 * drops when its holder dies. Interrupt-safe: the caller's interrupt flag is cleared while the lock is held and set
 * again afterwards, and a lock channel closed by an interrupt is reopened.
 */
final class NodeLock {
    private static final Logger LOG = LoggerFactory.getLogger(NodeLock.class);
    static final String LOCK = "ledger.lock";
    /** How often an operation is retried after interrupts closed its channel before the change fails. */
    static final int INTERRUPT_RETRIES = 100;

    /** One JVM-wide lock per state directory: fcntl locks are per process, so threads take this first. */
    private static final class DirLock {
        final ReentrantLock jvm = new ReentrantLock();
        /** Replaced (under {@link #jvm}) when an interrupt closed it: FileChannel is interruptible. */
        volatile FileChannel channel;
        /** Open NodeLocks using it; guarded by LOCKS. The channel closes with the last (closing it drops locks). */
        int users;
        final StateGroup group;

        DirLock(FileChannel channel, StateGroup group) {
            this.channel = channel;
            this.group = group;
        }

        /** Opens the lock file again after an interrupt closed the channel (holding no lock: closing dropped it). */
        void reopen(Path lockFile) throws IOException {
            if (!channel.isOpen()) {
                channel = open(lockFile, group);
            }
        }
    }

    private static final Map<Path, DirLock> LOCKS = new ConcurrentHashMap<>();

    private final Path dir;
    private final Path lockFile;
    private final DirLock dirLock;
    /** An interrupt arrived during this transaction's I/O; the caller's flag is set again when it ends (jvm lock). */
    private boolean interruptedDuringIo;

    /**
     * Opens (creating, mode 0644) the lock file of {@code dir}, shared with every other NodeLock of this JVM on it.
     *
     * @throws LedgerException when it cannot be opened, or others may write it
     */
    NodeLock(Path dir, StateGroup group) {
        this.lockFile = dir.resolve(LOCK);
        try {
            // one JVM-wide lock per directory, whatever name it is given (a link to it, a relative path): closing
            // one of two channels on the same file would drop this process's fcntl lock held through the other
            this.dir = dir.toRealPath();
        } catch (IOException e) {
            throw io("cannot resolve the state directory " + dir, dir, e);
        }
        synchronized (LOCKS) {
            this.dirLock = LOCKS.computeIfAbsent(this.dir, d -> {
                try {
                    return new DirLock(open(lockFile, group), group);
                } catch (IOException e) {
                    throw io("cannot open the lock file " + lockFile, lockFile, e);
                }
            });
            dirLock.users++;
        }
        try {
            LedgerDirectorySecurity.checkFile(lockFile, "lock file", group);
        } catch (LedgerException e) {
            release();
            throw e;
        }
    }

    /**
     * Opens (creating, mode 0644, or 0660 in a directory the state group shares) the lock file for reading and
     * writing, never through a link: unlike a write-only open, that never waits for a FIFO's reader (this runs under
     * {@link #LOCKS}), and anything but a regular file with one link is refused.
     */
    private static FileChannel open(Path lockFile, StateGroup group) throws IOException {
        refuseIrregular(lockFile);
        Set<PosixFilePermission> mode = LedgerDirectorySecurity.fileMode(lockFile.getParent(), group);
        boolean made = !Files.exists(lockFile, LinkOption.NOFOLLOW_LINKS);
        FileChannel c = FileChannel.open(lockFile, Set.of(StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(mode));
        try {
            refuseIrregular(lockFile);
            if (made && mode.contains(PosixFilePermission.GROUP_WRITE)) {
                LedgerDirectorySecurity.setMode(lockFile, mode); // the umask may have narrowed it
            }
        } catch (LedgerException | IOException e) {
            c.close();
            throw e;
        }
        return c;
    }

    private static void refuseIrregular(Path lockFile) {
        if (Files.exists(lockFile, LinkOption.NOFOLLOW_LINKS)
                && !Files.isRegularFile(lockFile, LinkOption.NOFOLLOW_LINKS)) {
            throw new LedgerException(LedgerException.Kind.INSECURE_PERMISSIONS, lockFile, "the lock file "
                    + lockFile + " is not a regular file (a directory, FIFO or device); it is not used: remove it,"
                    + " and the next writer creates it", null);
        }
    }

    /**
     * Runs {@code r} holding the JVM's and the node's lock. The caller's interrupt flag is cleared for the duration
     * and set again afterwards (with any interrupt that arrived meanwhile, see {@link #interruptedDuringIo}): the
     * channels are interruptible, and an interrupted operation would close them for every thread of the JVM and leave
     * a change half done.
     */
    void run(Runnable r) {
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
                    LOG.debug("releasing the lock on {}: {}", lockFile, e.toString());
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

    /** Records (holding the lock) that an interrupt arrived during I/O: the caller's flag is set again at the end. */
    void interruptedDuringIo(boolean interrupted) {
        interruptedDuringIo |= interrupted;
    }

    private FileLock lockNode() {
        for (int tries = 0;; tries++) {
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

    /**
     * Runs {@code last} holding the JVM's lock (no other thread of this JVM is in a transaction on the directory),
     * then lets go of the lock file when no other NodeLock of this JVM uses the directory.
     */
    void close(Runnable last) {
        dirLock.jvm.lock();
        try {
            last.run();
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
}
