package io.gpusched.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * Everything a child process wrote to its standard output, in complete lines, for tests that SIGKILL children and then
 * judge what they acknowledged. {@link Process#destroyForcibly()} closes the parent's end of the child's pipes (JDK
 * 17's {@code ProcessImpl.destroy}): what the child wrote and the test had not read yet is dropped, and the reading
 * thread gets {@code IOException: Stream closed}. A test that took that for "the child was killed" lost the child's
 * last lines (a {@code REL} printed before a release), and reported the release as a lost grant. {@link #kill} sends
 * SIGKILL through the process's handle, which leaves the pipe open: the reader reads to the end of what the child
 * wrote. A last line without its newline (the child killed while printing it) is not a line; a failed read is an
 * error of {@link #awaitEnd}, never the end of the output.
 */
public final class ChildOutput {
    private final Process process;
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final Thread reader;
    private volatile IOException failure;
    private volatile int tornBytes;

    private ChildOutput(Process process) {
        this.process = process;
        this.reader = new Thread(this::read, "child-output-" + process.pid());
        this.reader.setDaemon(true);
        this.reader.start();
    }

    /**
     * Starts reading {@code p}'s standard output (it must be a pipe: {@link ProcessBuilder.Redirect#PIPE}).
     *
     * @return the output, read by a thread of its own
     */
    public static ChildOutput of(Process p) {
        return new ChildOutput(p);
    }

    /**
     * Kills {@code p} with SIGKILL without closing the parent's end of its pipes (unlike
     * {@link Process#destroyForcibly()}), so that what it wrote before it died can still be read.
     */
    public static void kill(Process p) {
        p.toHandle().destroyForcibly();
    }

    /** Kills this child with SIGKILL; its output stays readable ({@link #kill(Process)}). */
    public void kill() {
        kill(process);
    }

    /** @return the complete lines read so far */
    public List<String> lines() {
        return List.copyOf(lines);
    }

    /** @return whether a complete line read so far starts with {@code prefix} */
    public boolean anyStartsWith(String prefix) {
        return lines.stream().anyMatch(l -> l.startsWith(prefix));
    }

    /**
     * Waits for the child to end and its output to be read to its end.
     *
     * @return every complete line the child wrote
     * @throws IllegalStateException when the child or the reading did not end within {@code limit}, or the output
     *                               could not be read to its end
     */
    public List<String> awaitEnd(Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        if (!process.waitFor(limit.toNanos(), TimeUnit.NANOSECONDS)) {
            throw new IllegalStateException("child " + process.pid() + " still runs after " + limit);
        }
        reader.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        if (reader.isAlive()) {
            throw new IllegalStateException("the output of child " + process.pid() + " (ended) was not read to its"
                    + " end within " + limit + ": another process holds its pipe?");
        }
        if (failure != null) {
            throw new IllegalStateException("the output of child " + process.pid() + " could not be read to its end"
                    + " after " + lines.size() + " lines: " + failure, failure);
        }
        return lines();
    }

    /** @return the bytes after the last newline (a line the child was killed while printing); 0 before the end */
    public int tornBytes() {
        return tornBytes;
    }

    private void read() {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        try (InputStream in = process.getInputStream()) {
            for (int n; (n = in.read(buf)) >= 0;) {
                for (int i = 0; i < n; i++) {
                    if (buf[i] == '\n') {
                        lines.add(line.toString(StandardCharsets.UTF_8));
                        line.reset();
                    } else {
                        line.write(buf[i]);
                    }
                }
            }
            tornBytes = line.size();
        } catch (IOException e) {
            failure = e;
        }
    }
}
