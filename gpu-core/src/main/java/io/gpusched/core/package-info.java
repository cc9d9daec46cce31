/**
 * The API: values, the inventory SPI and the scheduler. Start with {@link io.gpusched.core.GpuInventories}
 * ({@code detect()}, {@code simulated(profile)}) for a {@link io.gpusched.core.GpuInventory}, then
 * {@link io.gpusched.core.GpuScheduler#builder()} and {@link io.gpusched.core.GpuRequests} for requests.
 *
 * <p>Behind {@code GpuScheduler} (package-private): {@code DefaultGpuScheduler} orchestrates small parts:
 * {@code Placement} decides on an immutable snapshot, {@code Ledger} makes each change a transaction (in memory, or
 * on the node ledger shared by every process of the node), {@code RateLimits}, {@code WaitQueue}/{@code WaitTickets}
 * (waiting allocations), {@code Leases}, {@code DrainControl} and {@code HealthTracker}. The node ledger's parts:
 * {@code LedgerFile} (open, catch up, append and force, read for readers), {@code NodeLock} (the JVM's and the
 * node's {@code fcntl} lock), {@code LedgerCodec} (the text format: header, CRC'd record lines),
 * {@code LedgerCompaction} (a new generation renamed over the old) and {@code LedgerDirectorySecurity} (who may have
 * written the directory and its files).
 */
package io.gpusched.core;
