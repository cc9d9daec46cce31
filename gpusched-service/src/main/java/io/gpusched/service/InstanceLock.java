package io.gpusched.service;

import io.gpusched.core.GpuException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One node service per state directory: an exclusive lock on {@code <job output dir>/service.lock} (a directory only
 * root writes), held while the service runs and dropped by the kernel when its process dies, so a killed service
 * never blocks its successor. A second service started on the same state directory is refused before it ends any
 * job: its start would otherwise take the running service's jobs for a dead predecessor's leftovers and end them.
 */
final class InstanceLock implements AutoCloseable {
    static final String FILE = "service.lock";

    private final FileChannel channel;
    private final FileLock lock;

    private InstanceLock(FileChannel channel, FileLock lock) {
        this.channel = channel;
        this.lock = lock;
    }

    /**
     * @param dir the service's own directory (root's, 0711)
     * @return the held lock
     * @throws GpuException naming the state directory and the running service's pid, when another service holds it
     */
    static InstanceLock acquire(Path dir, Path stateDir) {
        Path f = dir.resolve(FILE);
        Path key;
        try {
            key = dir.toRealPath();
        } catch (IOException e) {
            throw new GpuException("cannot resolve the service's directory " + dir + ": " + e);
        }
        // a POSIX record lock is the process's: a second channel on the file, closed, would drop the first one's lock,
        // so a second service in this JVM is refused here, before it opens the file at all
        if (HELD.putIfAbsent(key, Boolean.TRUE) != null) {
            throw new GpuException("another gpusched service runs on state directory " + stateDir + " (pid "
                    + ProcessHandle.current().pid() + ", this process, holding " + f + "): stop it first, or give this"
                    + " one another state directory; this one ended nothing");
        }
        try {
            InstanceLock l = lock(f, stateDir);
            l.key = key;
            return l;
        } catch (RuntimeException e) {
            HELD.remove(key);
            throw e;
        }
    }

    /** The service directories this JVM holds the lock of. */
    private static final Map<Path, Boolean> HELD = new ConcurrentHashMap<>();
    private Path key;

    private static InstanceLock lock(Path f, Path stateDir) {
        FileChannel ch;
        try {
            ch = FileChannel.open(f, Set.of(StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                    PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        } catch (IOException e) {
            throw new GpuException("cannot open the service's lock file " + f + ": " + e);
        }
        FileLock held;
        try {
            held = ch.tryLock();
        } catch (OverlappingFileLockException e) {
            held = null; // this process runs a service on this state directory already
        } catch (IOException e) {
            close(ch);
            throw new GpuException("cannot lock " + f + ": " + e);
        }
        if (held == null) {
            String pid = readPid(ch);
            close(ch);
            throw new GpuException("another gpusched service runs on state directory " + stateDir + " (pid " + pid
                    + ", holding " + f + "): stop it first (systemctl stop gpusched), or give this one another"
                    + " --state-dir; this one ended nothing");
        }
        try {
            byte[] me = (ProcessHandle.current().pid() + "\n").getBytes(StandardCharsets.US_ASCII);
            ch.truncate(0);
            ch.write(ByteBuffer.wrap(me), 0);
        } catch (IOException e) {
            // the pid is only for the message a second service prints; the lock is what counts
        }
        return new InstanceLock(ch, held);
    }

    private static String readPid(FileChannel ch) {
        try {
            ByteBuffer b = ByteBuffer.allocate(24);
            ch.read(b, 0);
            String s = new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII).strip();
            return s.matches("[0-9]{1,10}") ? s : "unknown";
        } catch (IOException e) {
            return "unknown";
        }
    }

    private static void close(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // nothing held
        }
    }

    @Override
    public synchronized void close() {
        if (key == null) {
            return;
        }
        try {
            lock.release();
        } catch (IOException ignored) {
            // closing the channel drops it too
        }
        close(channel);
        HELD.remove(key);
        key = null;
    }
}
