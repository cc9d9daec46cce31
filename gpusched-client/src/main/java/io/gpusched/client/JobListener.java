package io.gpusched.client;

import io.gpusched.core.AllocationView;

/**
 * What an attached job ({@link NodeClient#run}) reports as it happens, in order: queued (when it waits for GPUs),
 * started, then its output as it comes. Called on the thread that called {@code run}.
 */
public interface JobListener {

    /** The request waits in the node's queue, at this position (1 first). */
    default void queued(int position) {
    }

    /**
     * The job started.
     *
     * @param job        the job
     * @param allocation its GPUs
     */
    default void started(JobView job, AllocationView allocation) {
    }

    /** @param data bytes the job wrote to its standard output */
    default void stdout(byte[] data) {
    }

    /** @param data bytes the job wrote to its standard error */
    default void stderr(byte[] data) {
    }
}
