package io.gpusched.service;

import java.io.IOException;

/**
 * Where a job's events go: the attached client's stream (each call gives one line; an {@link IOException} means the
 * client has gone, and the job is ended), or a detached job's output file.
 */
interface JobSink {
    /** @return whether the client has gone (a waiting job is then dropped) */
    boolean gone();

    /** The job waits in the fair queue at this position. */
    void queued(int position) throws IOException;

    /** The job started. */
    void started(Job job) throws IOException;

    /** Output of the job's stdout or stderr. */
    void output(boolean stderr, byte[] b, int len) throws IOException;

    /** Nothing happened for a while (the client's connection is checked by writing). */
    void heartbeat() throws IOException;

    /**
     * @return how long, in {@link System#nanoTime} nanoseconds, the job's output of this stream has waited for its
     *         client (room in a slow or paused client's queue), the wait under way included; 0 for a sink that never
     *         waits for one (a detached job's file)
     */
    default long roomWaitNanos(boolean stderr) {
        return 0;
    }

    /** The job's processes ended; its relays may still give output (what its pipes held). */
    default void jobEnded() {
    }

    /** The job ended with this code (and the signal that ended it, or null). */
    void exit(int code, String signal) throws IOException;
}
