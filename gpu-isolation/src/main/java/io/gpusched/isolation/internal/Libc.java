package io.gpusched.isolation.internal;

import com.sun.jna.LastErrorException;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;

/** The few libc calls isolation needs; {@link LastErrorException} carries errno. Internal. */
public interface Libc extends Library {
    /** O_RDONLY | O_DIRECTORY | O_CLOEXEC. */
    int O_DIR_CLOEXEC = 0x10000 | 0x80000;
    /** S_IFCHR. */
    int S_IFCHR = 0x2000;
    /** O_CLOEXEC, for {@link #pipe2}. */
    int O_CLOEXEC = 0x80000;
    /** RLIMIT_MEMLOCK. */
    int RLIMIT_MEMLOCK = 8;

    /** Loaded lazily: a failure becomes an unavailability cause, never an exception from a static initializer. */
    final class Holder {
        private Holder() {
        }

        private static volatile Libc instance;
        private static volatile String failure;

        /** @return libc, or null with {@link #failure()} saying why */
        public static synchronized Libc get() {
            if (instance == null && failure == null) {
                if (Boolean.getBoolean("gpusched.native.disable")) {
                    failure = "native code is disabled (-Dgpusched.native.disable=true)";
                } else {
                    try {
                        instance = Native.load("c", Libc.class);
                    } catch (UnsatisfiedLinkError | RuntimeException e) {
                        failure = "libc could not be loaded through JNA: " + e.getMessage();
                    }
                }
            }
            return instance;
        }

        /** @return why libc is unavailable, or null */
        public static String failure() {
            get();
            return failure;
        }
    }

    long syscall(long number, Object... args) throws LastErrorException;

    int open(String path, int flags) throws LastErrorException;

    int close(int fd) throws LastErrorException;

    int pipe2(int[] fds, int flags) throws LastErrorException;

    int mknod(String path, int mode, long dev) throws LastErrorException;

    int openat(int dirfd, String path, int flags, int mode) throws LastErrorException;

    int mkdirat(int dirfd, String path, int mode) throws LastErrorException;

    int mknodat(int dirfd, String path, int mode, long dev) throws LastErrorException;

    int fchmodat(int dirfd, String path, int mode, int flags) throws LastErrorException;

    int fchownat(int dirfd, String path, int uid, int gid, int flags) throws LastErrorException;

    int unlinkat(int dirfd, String path, int flags) throws LastErrorException;

    int fstatfs(int fd, Pointer buf) throws LastErrorException;

    int geteuid();

    int flock(int fd, int operation) throws LastErrorException;

    int setrlimit(int resource, Pointer rlimit) throws LastErrorException;

    int kill(int pid, int sig) throws LastErrorException;

    /** @return {@code makedev(major, minor)} as glibc encodes it */
    static long makedev(int major, int minor) {
        long ma = major & 0xFFFFFFFFL;
        long mi = minor & 0xFFFFFFFFL;
        return ((ma & 0xFFFFF000L) << 32) | ((ma & 0xFFFL) << 8) | ((mi & 0xFFFFFF00L) << 12) | (mi & 0xFFL);
    }

    /** @return a one-line errno description: "EPERM (Operation not permitted)" style from JNA's message */
    static String describe(LastErrorException e) {
        String m = e.getMessage();
        return "errno " + e.getErrorCode() + (m == null ? "" : " " + m.replaceFirst("^\\[\\d+\\]\\s*", "("))
                + (m == null ? "" : ")");
    }
}
