package io.gpusched.service;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * A detached job's output: {@code <state dir>/jobs/<job id>.out}, made by the service (new, never following a link,
 * in a directory only root writes: mode 0711, lists nothing to users) and kept root's (mode 0600): the job never holds
 * it, it writes to a pipe the service drains, and its user reads it through the service ({@code logs ID}, owner and
 * admins only). The service writes what the job prints, up to {@link #MAX_BYTES}; past that it writes one line saying
 * so and drops the rest (still reading it, so the job never blocks). As nobody but root can write the file, a job or
 * its user cannot fill the state directory's disk through it. What one user's running detached jobs write together is
 * bounded too ({@link Budget}): many jobs at once cannot add up past it.
 */
final class OutputFile implements JobSink {
    /** Most bytes of output kept per job. */
    static final long MAX_BYTES = 64L << 20;

    private final Path file;
    private final FileChannel out;
    private final Budget budget;
    private long written;
    private boolean capped;
    /** The job's processes ended ({@link #jobEnded}): its bytes are no longer its user's running jobs'. */
    private boolean jobEnded;
    private boolean closed;
    /** Bytes a write the disk refused dropped since the last that succeeded; {@link #lostWhy} says why. */
    private long lost;
    private String lostWhy;

    /** The bytes one user's running detached jobs may still write together. */
    interface Budget {
        /** @return how many of {@code want} bytes may be written (taken from the budget) */
        long take(long want);

        /** Gives back what a job that ended had taken (its output then counts among its user's ended jobs'). */
        void giveBack(long n);

        /** @return the budget's size, in bytes (for the line saying it was reached) */
        long size();
    }

    private OutputFile(Path file, FileChannel out, Budget budget) {
        this.file = file;
        this.out = out;
        this.budget = budget;
    }

    /** @return the directory job output files live in, made 0711 root when absent (refused when unsafe) */
    static Path directory(Path stateDir) throws IOException {
        Path dir = stateDir.resolve("jobs");
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            Files.createDirectory(dir);
        }
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException(dir + " is not a directory (a link or a file): job output is not written there");
        }
        Object owner = Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        Object me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        if (!owner.equals(me)) {
            throw new IOException(dir + " is owned by uid " + owner + ", not by the service's uid " + me + ": its owner"
                    + " could rename or replace job output files; remove it (the service makes it anew)");
        }
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx--x--x"));
        return dir;
    }

    /**
     * Deletes the output files a previous run of the service left in {@code dir}: their jobs' records died with it, so
     * nobody can read them through the service any more, and left there they would fill the disk across restarts.
     * Only entries named {@code *.out} go (a link is removed, never followed; a directory is left); the directory
     * is root's alone (0711), so nothing in it was put there by a user.
     *
     * @return how many were deleted
     */
    static int forgetPreviousRun(Path dir) throws IOException {
        int n = 0;
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir, "*.out")) {
            for (Path f : s) {
                if (!Files.isDirectory(f, LinkOption.NOFOLLOW_LINKS) && Files.deleteIfExists(f)) {
                    n++;
                }
            }
        }
        return n;
    }

    /**
     * Makes the file (it must not exist), the service's own (0600): given to the job's user, the user could write it
     * past the cap, or make it sparse and huge, from any login.
     */
    static OutputFile create(Path dir, String jobId, Budget budget) throws IOException {
        Path f = dir.resolve(jobId + ".out");
        FileChannel ch = FileChannel.open(f, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                StandardOpenOption.APPEND, LinkOption.NOFOLLOW_LINKS),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        return new OutputFile(f, ch, budget);
    }

    Path path() {
        return file;
    }

    @Override
    public boolean gone() {
        return false;
    }

    @Override
    public void queued(int position) {
    }

    @Override
    public void started(Job job) {
    }

    /**
     * Writes what the job printed, within the job's cap and its user's budget. A write the disk refuses (full: the
     * state directory shares its disk) drops that output, not the job: the bytes go back to the budget, and the next
     * write that succeeds is preceded by a line saying how much was lost and why. Never throws: a detached job has no
     * client whose failure it could mean.
     */
    @Override
    public synchronized void output(boolean stderr, byte[] b, int len) {
        if (capped || closed) {
            return;
        }
        int mine = (int) Math.min(len, MAX_BYTES - written);
        // once its processes ended, what its relays still write (a pipe's worth) is an ended job's, which the ended
        // jobs' budget counts (Jobs.trim), not the running jobs' one
        int n = jobEnded ? mine : (int) budget.take(mine);
        ByteBuffer buf = ByteBuffer.wrap(b, 0, n);
        try {
            noteLost();
            write(buf);
        } catch (IOException e) {
            int done = buf.position();
            written += done;
            if (!jobEnded) {
                budget.giveBack(n - done);
            }
            lost += len - done;
            lostWhy = "the state directory's disk refused them (" + e.getMessage() + ")";
            return;
        }
        written += n;
        if (n < len) {
            capped = true;
            String why = n < mine ? "the output of its user's running detached jobs together passed " + budget.size()
                    + " bytes" : "the job's output passed " + (MAX_BYTES >> 20) + " MiB";
            try {
                write(ByteBuffer.wrap(("\n[gpusched: " + why + "; the rest is not kept]\n").getBytes(
                        StandardCharsets.UTF_8)));
            } catch (IOException e) {
                lostWhy = "the state directory's disk refused them (" + e.getMessage() + ")";
            }
        }
    }

    /** Writes the line saying how much output a refused write dropped, if any, and why. */
    private void noteLost() throws IOException {
        if (lost > 0) {
            write(ByteBuffer.wrap(("\n[gpusched: " + lost + " bytes of output were not kept: " + lostWhy + "]\n")
                    .getBytes(StandardCharsets.UTF_8)));
            lost = 0;
        }
    }

    private void write(ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            out.write(b);
        }
    }

    @Override
    public void heartbeat() {
    }

    /**
     * The job's processes ended: its bytes go back to its user's running jobs' budget at once, not once its output is
     * final (a pipe a process outside the job holds keeps its relays 10 s: review51 saw a running job cut meanwhile).
     */
    @Override
    public synchronized void jobEnded() {
        if (!jobEnded && !closed) {
            jobEnded = true;
            budget.giveBack(written);
        }
    }

    @Override
    public synchronized void exit(int code, String signal) throws IOException {
        if (!closed) {
            closed = true;
            if (!jobEnded) {
                budget.giveBack(written);
            }
            try { // lost at the end, with no write after it to say so: said now if the disk lets it
                noteLost();
            } catch (IOException stillFull) {
                // nothing more can be written to it
            }
        }
        out.close();
    }
}
