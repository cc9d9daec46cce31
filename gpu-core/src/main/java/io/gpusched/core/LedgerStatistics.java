package io.gpusched.core;

import java.nio.file.Path;
import java.time.Duration;

/**
 * What one process has appended to the node ledger since its scheduler was built: each change (or group of changes
 * decided together) is one append forced to disk, so {@code forceTotal / forces} is the mean durable-write cost.
 *
 * @param file          the ledger file
 * @param forces        appends forced to disk (group commits)
 * @param records       records written by those appends
 * @param forceNanos    time spent in the force calls, in nanoseconds, summed
 * @param forceNanosMax the slowest single force, in nanoseconds
 */
public record LedgerStatistics(Path file, long forces, long records, long forceNanos, long forceNanosMax) {

    /** @return the time spent forcing, summed */
    public Duration forceTotal() {
        return Duration.ofNanos(forceNanos);
    }

    /** @return the slowest single force */
    public Duration forceMax() {
        return Duration.ofNanos(forceNanosMax);
    }
}
