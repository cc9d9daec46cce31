package io.gpusched.isolation.internal;

import com.sun.jna.LastErrorException;

/** The libc calls isolation makes, with errno turned into {@link ErrnoException}. Internal. */
public final class Sys {
    private Sys() {
    }

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

    /** @return an O_RDONLY|O_DIRECTORY|O_CLOEXEC fd of a directory */
    public static int openDirectory(String path) throws ErrnoException {
        try {
            return libc().open(path, Libc.O_DIR_CLOEXEC);
        } catch (LastErrorException e) {
            throw new ErrnoException(e);
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
