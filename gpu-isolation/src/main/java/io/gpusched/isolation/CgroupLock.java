package io.gpusched.isolation;

import io.gpusched.isolation.internal.Sys;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Serializes every fence operation on one cgroup across the threads and processes of a node: an exclusive
 * {@code flock(2)} on {@code <stateDir>/lock-<dev>-<inode>} of the cgroup's identity, taken before the cgroup's
 * rules are read and released after they are written back (flock locks belong to the open file, so they work between
 * threads too and vanish with a process that dies). Inside one JVM a striped {@link ReentrantLock} comes first, which
 * makes the lock reentrant for a thread (a fence that updates an existing fence) and keeps threads from polling the
 * file. A lock file is removed by its holder once the cgroup has no record left (unfenced); a waiter that then wins
 * the lock of the removed file sees that the path no longer names it, and tries again.
 */
final class CgroupLock implements AutoCloseable {
    /** How long a fence waits for another holder before it gives up without writing. */
    static final long WAIT_MILLIS = TimeUnit.SECONDS.toMillis(120);

    private static final ReentrantLock[] STRIPES = new ReentrantLock[64];
    private static final Map<CgroupDir.Id, CgroupLock> HELD = new ConcurrentHashMap<>();

    static {
        for (int i = 0; i < STRIPES.length; i++) {
            STRIPES[i] = new ReentrantLock();
        }
    }

    private final Path stateDir;
    private final CgroupDir.Id id;
    private final Path file;
    private final ReentrantLock stripe;
    private final int fd;
    private int holds = 1;

    private CgroupLock(Path stateDir, CgroupDir.Id id, Path file, ReentrantLock stripe, int fd) {
        this.stateDir = stateDir;
        this.id = id;
        this.file = file;
        this.stripe = stripe;
        this.fd = fd;
    }

    static Path file(Path stateDir, CgroupDir.Id id) {
        return stateDir.resolve("lock-" + id.dev() + "-" + id.ino());
    }

    /**
     * Takes the node-wide lock of a cgroup.
     *
     * @throws IsolationException when the state directory is unusable or another holder kept the lock longer than
     *                            {@link #WAIT_MILLIS}; nothing was written then
     */
    static CgroupLock acquire(Path stateDir, CgroupDir.Id id, Path cgroup) {
        ReentrantLock stripe = STRIPES[Math.floorMod(id.hashCode(), STRIPES.length)];
        stripe.lock();
        CgroupLock mine = HELD.get(id);
        if (mine != null) { // only this thread can hold it: holders keep the stripe
            mine.holds++;
            return mine;
        }
        try {
            V1Record.ensureStateDir(stateDir);
            Path file = file(stateDir, id);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MILLIS);
            long pause = 1;
            while (true) {
                int fd = Sys.openLockFile(file.toString());
                boolean keep = false;
                try {
                    if (Sys.tryLockExclusive(fd)) {
                        if (sameFile(fd, file)) {
                            keep = true;
                            CgroupLock l = new CgroupLock(stateDir, id, file, stripe, fd);
                            HELD.put(id, l);
                            return l;
                        }
                        continue; // its holder removed the file after we opened it: take the one there now
                    }
                } finally {
                    if (!keep) {
                        Sys.close(fd);
                    }
                }
                if (System.nanoTime() > deadline) {
                    throw new IsolationException("another fence operation on cgroup " + cgroup + " (a thread or"
                            + " process of this node) held its lock " + file + " for more than " + WAIT_MILLIS
                            + " ms; nothing was written");
                }
                Thread.sleep(pause);
                pause = Math.min(20, pause * 2);
            }
        } catch (IOException | Sys.ErrnoException e) {
            stripe.unlock();
            throw new IsolationException("taking the lock of cgroup " + cgroup + " in " + stateDir + " failed: "
                    + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            stripe.unlock();
            throw new IsolationException("interrupted while waiting for the lock of cgroup " + cgroup
                    + "; nothing was written", e);
        } catch (RuntimeException e) {
            stripe.unlock();
            throw e;
        }
    }

    private static boolean sameFile(int fd, Path file) throws IOException {
        long[] held = Sys.identity(fd);
        try {
            return held[0] == (Long) Files.getAttribute(file, "unix:dev", LinkOption.NOFOLLOW_LINKS)
                    && held[1] == (Long) Files.getAttribute(file, "unix:ino", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException gone) {
            return false;
        }
    }

    /** Releases one hold; the last removes the lock file when the cgroup has no record, then unlocks. */
    @Override
    public void close() {
        try {
            if (--holds > 0) {
                return;
            }
            HELD.remove(id, this);
            if (!Files.exists(V1Record.file(stateDir, id), LinkOption.NOFOLLOW_LINKS)) {
                try {
                    Files.deleteIfExists(file);
                } catch (IOException e) {
                    AbstractFence.LOG.debug("could not remove lock file {}: {}", file, e.getMessage());
                }
            }
            Sys.close(fd);
        } finally {
            stripe.unlock();
        }
    }
}
