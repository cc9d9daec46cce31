package io.gpusched.isolation.internal;

import com.sun.jna.LastErrorException;
import com.sun.jna.Memory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/** The libc calls isolation makes, with errno turned into {@link ErrnoException}. Internal. */
public final class Sys {
    private Sys() {
    }

    /** statfs f_type of cgroup v1 hierarchies. */
    public static final long CGROUP_SUPER_MAGIC = 0x27e0ebL;
    /** statfs f_type of cgroup2. */
    public static final long CGROUP2_SUPER_MAGIC = 0x63677270L;
    /** ENOENT. */
    public static final int ENOENT = 2;
    /** EEXIST. */
    public static final int EEXIST = 17;
    /** ENOTDIR. */
    public static final int ENOTDIR = 20;
    /** ELOOP. */
    public static final int ELOOP = 40;

    private static final boolean GENERIC_FLAGS = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT)
            .matches("aarch64|arm64|riscv64|loongarch64");
    /** O_DIRECTORY: 0200000 on x86_64, 040000 on the generic (arm64, riscv) layout. */
    static final int O_DIRECTORY = GENERIC_FLAGS ? 0x4000 : 0x10000;
    /** O_NOFOLLOW: 0400000 on x86_64, 0100000 on the generic layout. */
    static final int O_NOFOLLOW = GENERIC_FLAGS ? 0x8000 : 0x20000;
    static final int O_CLOEXEC = 0x80000;
    static final int AT_SYMLINK_NOFOLLOW = 0x100;
    /** O_PATH (same value on x86_64 and the generic ABI). */
    static final int O_PATH = 0x200000;

    /** A libc call failed. */
    public static final class ErrnoException extends Exception {
        private final int errno;

        ErrnoException(LastErrorException e) {
            super(Libc.describe(e), e);
            this.errno = e.getErrorCode();
        }

        /** @return errno */
        public int errno() {
            return errno;
        }
    }

    private static Libc libc() {
        Libc l = Libc.Holder.get();
        if (l == null) {
            throw new IllegalStateException(Libc.Holder.failure());
        }
        return l;
    }

    /** @return an O_RDONLY|O_DIRECTORY|O_CLOEXEC fd of a directory (the path's symlinks are followed) */
    public static int openDirectory(String path) throws ErrnoException {
        try {
            return libc().openat(-100, path, O_DIRECTORY | O_CLOEXEC, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /**
     * @return an fd of directory {@code name} inside {@code dirfd}, refusing a symlink (ELOOP) or a non-directory
     *         (ENOTDIR); {@code dirfd} -100 (AT_FDCWD) with an absolute name refuses only a symlink as last component
     */
    public static int openDirectoryNoFollow(int dirfd, String name) throws ErrnoException {
        try {
            return libc().openat(dirfd, name, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** mkdirat; an existing entry is not an error (the caller opens it without following). */
    public static void mkdirAt(int dirfd, String name, int mode) throws ErrnoException {
        try {
            libc().mkdirat(dirfd, name, mode);
        } catch (LastErrorException e) {
            if (e.getErrorCode() != EEXIST) {
                throw new ErrnoException(e);
            }
        }
    }

    /** Makes a char device node {@code name} in {@code dirfd} (never follows a symlink: mknodat does not). */
    public static void mknodCharAt(int dirfd, String name, int mode, int major, int minor) throws ErrnoException {
        try {
            libc().mknodat(dirfd, name, Libc.S_IFCHR | (mode & 0777), Libc.makedev(major, minor));
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** fchmodat with AT_SYMLINK_NOFOLLOW (a symlink is refused, never followed). */
    public static void chmodNoFollow(int dirfd, String name, int mode) throws ErrnoException {
        try {
            libc().fchmodat(dirfd, name, mode & 07777, AT_SYMLINK_NOFOLLOW);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** fchownat with AT_SYMLINK_NOFOLLOW. */
    public static void chownNoFollow(int dirfd, String name, int uid, int gid) throws ErrnoException {
        try {
            libc().fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /**
     * @return an O_PATH fd of entry {@code name} in {@code dirfd}, refusing a symlink (ELOOP): whatever is renamed
     *         over the name afterwards, the fd keeps naming this inode
     */
    public static int openPathNoFollow(int dirfd, String name) throws ErrnoException {
        try {
            return libc().openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** chmod of the inode an (O_PATH) fd holds, through its /proc/self/fd magic link (what glibc does). */
    public static void chmodFd(int fd, int mode) throws ErrnoException {
        try {
            libc().fchmodat(-100, fdPath(fd).toString(), mode & 07777, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** chown of the inode an (O_PATH) fd holds, through its /proc/self/fd magic link. */
    public static void chownFd(int fd, int uid, int gid) throws ErrnoException {
        try {
            libc().fchownat(-100, fdPath(fd).toString(), uid, gid, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** unlinkat of a non-directory. */
    public static void unlinkAt(int dirfd, String name) throws ErrnoException {
        try {
            libc().unlinkat(dirfd, name, 0);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** @return {@code f_type} of the filesystem an fd lies on (fstatfs) */
    public static long fsType(int fd) throws ErrnoException {
        Memory buf = new Memory(256);
        buf.clear();
        try {
            libc().fstatfs(fd, buf);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
        return buf.getLong(0);
    }

    /** @return the path through which an open fd can be named ({@code /proc/self/fd/N}) */
    public static Path fdPath(int fd) {
        return Path.of("/proc/self/fd/" + fd);
    }

    /** @return {dev, inode} of what an fd refers to (through its /proc/self/fd link) */
    public static long[] identity(int fd) throws IOException {
        Path p = fdPath(fd);
        return new long[]{(Long) Files.getAttribute(p, "unix:dev"), (Long) Files.getAttribute(p, "unix:ino")};
    }

    /** O_RDWR | O_CREAT (same on x86_64 and the generic layout). */
    static final int O_RDWR_CREAT = 0x2 | 0x40;
    static final int LOCK_EX = 2;
    static final int LOCK_NB = 4;
    static final int EWOULDBLOCK = 11;

    /** @return an O_RDWR fd of a lock file, made (mode 0600) when missing; a symlink is refused (ELOOP) */
    public static int openLockFile(String path) throws ErrnoException {
        try {
            return libc().openat(-100, path, O_RDWR_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** @return true when {@code flock(fd, LOCK_EX|LOCK_NB)} took the lock, false when another holder has it */
    public static boolean tryLockExclusive(int fd) throws ErrnoException {
        try {
            libc().flock(fd, LOCK_EX | LOCK_NB);
            return true;
        } catch (LastErrorException e) {
            if (e.getErrorCode() == EWOULDBLOCK) {
                return false;
            }
            throw new ErrnoException(e);
        }
    }

    /** Closes an fd, ignoring errors. */
    public static void close(int fd) {
        if (fd < 0) {
            return;
        }
        try {
            libc().close(fd);
        } catch (LastErrorException ignored) {
            // nothing to do
        }
    }

    /** Makes a char device node. */
    public static void mknodChar(String path, int mode, int major, int minor) throws ErrnoException {
        try {
            libc().mknod(path, Libc.S_IFCHR | (mode & 0777), Libc.makedev(major, minor));
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
        }
    }

    /** @return true when libc loaded; {@link Libc.Holder#failure()} says why not */
    public static boolean available() {
        return Libc.Holder.get() != null;
    }
}
