package io.gpusched.isolation.internal;

import com.sun.jna.LastErrorException;
import java.io.IOException;

/** Pipes and descriptors through libc, their errors as {@link IOException}s naming the errno. */
public final class Pipes {
    private Pipes() {
    }

    /**
     * @return a new pipe's {read end, write end}, both close-on-exec
     * @throws IOException naming the errno ({@code EMFILE}: too many open files)
     */
    public static int[] pipe(Libc libc) throws IOException {
        int[] fds = {-1, -1};
        try {
            libc.pipe2(fds, Libc.O_CLOEXEC);
        } catch (LastErrorException e) {
            throw new IOException("pipe2: " + Libc.describe(e), e);
        }
        return fds;
    }

    /** Closes {@code fd} when it is one (not negative); an error (EBADF at worst) is ignored. */
    public static void closeQuietly(Libc libc, int fd) {
        if (fd >= 0) {
            try {
                libc.close(fd);
            } catch (LastErrorException ignored) {
                // nothing else to undo
            }
        }
    }
}
