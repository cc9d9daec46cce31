package io.gpusched.isolation;

import io.gpusched.isolation.internal.Libc;
import io.gpusched.isolation.internal.Pipes;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A job's stdout and stderr pipes, made by this process ({@code pipe2}) and read through {@link FileChannel}s, rather
 * than the JDK's {@link Process} pipes. A job may pass the write end of its stdout on to a process outside its cgroup
 * (over a Unix socket, {@code SCM_RIGHTS}): the pipe then has a writer after every process of the job has ended, and a
 * read on the JDK's pipe stream blocks for as long as that process lives, whatever the reader's owner does (a close
 * from another thread does not wake it). A read on a {@code FileChannel} ends when its thread is interrupted or the
 * channel is closed, so the job's reader can always be let go; the process holding the write end then gets
 * {@code EPIPE}.
 *
 * <p>How: each pipe's read end is reopened through {@code /proc/self/fd/N} as a channel (a pipe's magic link opens
 * the same pipe, without waiting for a writer), and the JDK is told to redirect the child's stdout (stderr) to
 * {@code /proc/self/fd/M}, the write end, which it opens in this process before the child starts. This process's own
 * descriptors of both ends are closed once the child has started (the read side is the channel's own open file
 * description). Where libc cannot be reached (JNA) or a step fails, {@link #open} answers null and the launcher uses
 * the JDK's pipes.
 */
final class JobPipes {
    private static final Logger LOG = LoggerFactory.getLogger(JobPipes.class);

    private final Libc libc;
    private final int[] out;
    private final int[] err;
    private final FileChannel stdout;
    private final FileChannel stderr;

    private JobPipes(Libc libc, int[] out, int[] err, FileChannel stdout, FileChannel stderr) {
        this.libc = libc;
        this.out = out;
        this.err = err;
        this.stdout = stdout;
        this.stderr = stderr;
    }

    /** @return two pipes, their read ends open as channels; null (logged once per cause) when they cannot be made */
    static JobPipes open() {
        Libc libc = Libc.Holder.get();
        if (libc == null) {
            LOG.debug("job output through the JDK's pipes: {}", Libc.Holder.failure());
            return null;
        }
        int[] out = {-1, -1};
        int[] err = {-1, -1};
        FileChannel o = null;
        FileChannel e = null;
        try {
            out = Pipes.pipe(libc);
            err = Pipes.pipe(libc);
            o = reopen(out[0]);
            e = reopen(err[0]);
            closeQuietly(libc, out[0]);
            closeQuietly(libc, err[0]);
            out[0] = -1;
            err[0] = -1;
            return new JobPipes(libc, out, err, o, e);
        } catch (IOException | RuntimeException x) {
            LOG.warn("job output through the JDK's pipes: this process's own pipes could not be made: {}",
                    x.toString());
            for (int fd : new int[]{out[0], out[1], err[0], err[1]}) {
                closeQuietly(libc, fd);
            }
            for (FileChannel c : new FileChannel[]{o, e}) {
                if (c != null) {
                    try {
                        c.close();
                    } catch (IOException ignored) {
                        // closing what was never used
                    }
                }
            }
            return null;
        }
    }

    private static FileChannel reopen(int fd) throws IOException {
        return FileChannel.open(Path.of("/proc/self/fd/" + fd), StandardOpenOption.READ);
    }

    /** Sends the child's stdout and stderr to the write ends: call before {@link ProcessBuilder#start}. */
    void redirect(ProcessBuilder pb) {
        pb.redirectOutput(ProcessBuilder.Redirect.to(new File("/proc/self/fd/" + out[1])));
        pb.redirectError(ProcessBuilder.Redirect.to(new File("/proc/self/fd/" + err[1])));
    }

    /**
     * Closes this process's descriptors of the write ends: once the child has started (it has its own), or when it
     * could not start. Idempotent.
     */
    synchronized void started() {
        closeQuietly(libc, out[1]);
        closeQuietly(libc, err[1]);
        out[1] = -1;
        err[1] = -1;
    }

    /** Closes everything: the child could not be started. */
    void abandon() {
        started();
        for (FileChannel c : new FileChannel[]{stdout, stderr}) {
            try {
                c.close();
            } catch (IOException ignored) {
                // nothing was read
            }
        }
    }

    /** @return the child's stdout: a read ends when its thread is interrupted or the stream is closed */
    InputStream stdout() {
        return stream(stdout);
    }

    /** @return the child's stderr, as {@link #stdout} */
    InputStream stderr() {
        return stream(stderr);
    }

    private static InputStream stream(FileChannel ch) {
        return new InputStream() {
            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                int n = read(one, 0, 1);
                return n <= 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] b, int off, int len) throws IOException {
                if (len == 0) {
                    return 0;
                }
                return ch.read(ByteBuffer.wrap(b, off, len));
            }

            @Override
            public void close() throws IOException {
                ch.close();
            }
        };
    }

    private static void closeQuietly(Libc libc, int fd) {
        Pipes.closeQuietly(libc, fd);
    }
}
