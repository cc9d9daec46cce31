package io.gpusched.isolation;

import io.gpusched.isolation.internal.Sys;
import java.io.IOException;
import java.nio.file.Path;

/**
 * An open cgroup directory: its filesystem type checked with {@code fstatfs} and its identity (device and inode; on
 * cgroup2 the inode is the cgroup id) read through the fd, so every later write goes to this very cgroup even if its
 * path is removed and made again. Files are named through {@code /proc/self/fd/N}.
 */
final class CgroupDir implements AutoCloseable {

    /** A cgroup's identity: the filesystem's device and the directory's inode. */
    record Id(long dev, long ino) {
        @Override
        public String toString() {
            return "dev " + dev + " inode " + ino;
        }
    }

    /** The cgroup a fence was made for is gone (removed, or another cgroup now has its path). */
    static final class GoneException extends IsolationException {
        GoneException(String message) {
            super(message);
        }
    }

    final int fd;
    final Id id;

    private CgroupDir(int fd, Id id) {
        this.fd = fd;
        this.id = id;
    }

    /**
     * Opens a cgroup directory and checks it lies on the expected filesystem.
     *
     * @param v2 true for cgroup2, false for a cgroup v1 hierarchy
     * @throws GoneException when there is no such directory
     * @throws IsolationException when it is on another filesystem
     */
    static CgroupDir open(Path path, boolean v2) {
        int fd;
        try {
            fd = Sys.openDirectoryNoFollow(-100, path.toString());
        } catch (Sys.ErrnoException e) {
            if (e.errno() == Sys.ENOENT) {
                throw new GoneException("no such cgroup: " + path + " (" + e.getMessage() + ")");
            }
            throw new IsolationException("opening cgroup " + path + " failed: " + e.getMessage(), e);
        }
        try {
            long type = Sys.fsType(fd);
            long want = v2 ? Sys.CGROUP2_SUPER_MAGIC : Sys.CGROUP_SUPER_MAGIC;
            if (type != want) {
                throw new IsolationException(path + " is on a filesystem of type 0x" + Long.toHexString(type)
                        + ", not " + (v2 ? "cgroup2 (0x63677270)" : "cgroup v1 (0x27e0eb)")
                        + "; refusing to treat look-alike files as device rules");
            }
            long[] ident = Sys.identity(fd);
            return new CgroupDir(fd, new Id(ident[0], ident[1]));
        } catch (Sys.ErrnoException | IOException e) {
            Sys.close(fd);
            throw new IsolationException("reading the filesystem of " + path + " failed: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            Sys.close(fd);
            throw e;
        }
    }

    /**
     * Opens the cgroup a fence was made for.
     *
     * @throws GoneException when the path is gone or now names another cgroup
     */
    static CgroupDir reopen(Path path, boolean v2, Id expected) {
        CgroupDir d = open(path, v2);
        if (!d.id.equals(expected)) {
            d.close();
            throw new GoneException("the cgroup fenced at " + path + " (" + expected + ") was removed; the path now"
                    + " names another cgroup (" + d.id + ")");
        }
        return d;
    }

    /** @return a file of this cgroup, named through the open fd */
    Path file(String name) {
        return Sys.fdPath(fd).resolve(name);
    }

    @Override
    public void close() {
        Sys.close(fd);
    }
}
