package io.gpusched.core;

import java.util.List;
import java.util.Map;

/**
 * A point-in-time view of a scheduler, made of plain values so that it serializes to JSON as is
 * ({@link GpuScheduler#statusJson()}). Sizes are bytes; times are ISO-8601 text; absent values are null.
 *
 * @param backend     inventory backend
 * @param enabled     whether allocation is enabled
 * @param strategy    strategy name
 * @param at          when the status was taken
 * @param devices     per-device state
 * @param allocations live allocations
 * @param drainSupported whether released devices drain (the inventory can list processes)
 * @param notes       things to know about this scheduler's behaviour (e.g. no drain), and recovery problems
 */
public record SchedulerStatus(String backend, boolean enabled, String strategy, String at,
        List<Device> devices, List<Held> allocations, boolean drainSupported,
        List<String> notes) {

    /**
     * @param devices     device states (a scheduler's, or a {@link NodeLedgerView}'s)
     * @param allocations the live allocations, for the shared holders of each device
     * @return the devices as a status shows them
     */
    public static List<Device> devices(List<DeviceState> devices, List<Allocation> allocations) {
        return Statuses.devices(devices, allocations);
    }

    /**
     * One device.
     *
     * @param index              device index
     * @param uuid               device UUID
     * @param name               product name
     * @param vendor             vendor
     * @param memoryTotalBytes   total memory
     * @param reservableBytes    memory still reservable by shared requests (0 when held exclusively)
     * @param health             HEALTHY, UNHEALTHY or LOST
     * @param healthReason       why not healthy, or null
     * @param heldBy             id of the exclusive allocation holding it, or null
     * @param sharedBy           ids of shared allocations on it
     * @param utilizationPercent latest utilization, or null
     * @param memoryUsedBytes    latest memory in use, or null
     * @param temperatureCelsius latest temperature, or null
     * @param powerWatts         latest power draw, or null
     * @param pool               IN_POOL, DRAINING, QUARANTINED or CORDONED (drained by an admin)
     * @param poolReason         why draining or quarantined, or null
     */
    public record Device(int index, String uuid, String name, String vendor, long memoryTotalBytes,
            long reservableBytes, String health, String healthReason, String heldBy,
            List<String> sharedBy, Double utilizationPercent, Long memoryUsedBytes,
            Double temperatureCelsius, Double powerWatts, String pool, String poolReason) {
    }

    /**
     * One live allocation.
     *
     * @param id                id
     * @param owner             owner, or null
     * @param jobId             job id, or null
     * @param deviceIndices     device indices
     * @param deviceUuids       device UUIDs
     * @param sharing           EXCLUSIVE or SHARED
     * @param sharedMemoryBytes reservation per device when shared, or null
     * @param createdAt         creation time
     * @param labels            request labels
     * @param expiresAt         lease end, or null
     * @param placement         the strategy's certificate: "proven optimal", "within X % of optimal (...)" or
     *                          "not rated"
     * @param expired           whether its lease has run out when the status was taken (it is still held: its lease
     *                          does not end it, or its job could not be ended yet)
     * @param jobCgroup         the cgroup of the job using it, or null
     */
    public record Held(String id, String owner, String jobId, List<Integer> deviceIndices, List<String> deviceUuids,
            String sharing, Long sharedMemoryBytes, String createdAt, Map<String, String> labels,
            String expiresAt, String placement, boolean expired, String jobCgroup) {
    }
}
