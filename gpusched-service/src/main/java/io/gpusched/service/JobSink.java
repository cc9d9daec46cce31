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

    /** The job ended with this code (and the signal that ended it, or null). */
    void exit(int code, String signal) throws IOException;
}
