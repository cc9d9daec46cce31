/**
 * The API: values, the inventory SPI and the scheduler. Start with {@link io.gpusched.core.GpuInventories}
 * ({@code detect()}, {@code simulated(profile)}) for a {@link io.gpusched.core.GpuInventory}, then
 * {@link io.gpusched.core.GpuScheduler#builder()} and {@link io.gpusched.core.GpuRequests} for requests.
 *
 * <p>Behind {@code GpuScheduler} (package-private): {@code DefaultGpuScheduler} orchestrates small parts:
 * {@code Placement} decides on an immutable snapshot, {@code Ledger} makes each change a transaction (in memory, or
 * on the node ledger, {@code NodeLedger}, shared by every process of the node), {@code RateLimits},
 * {@code WaitQueue}/{@code WaitTickets} (waiting allocations), {@code Leases}, {@code DrainControl} and
 * {@code HealthTracker}.
 */
package io.gpusched.core;
