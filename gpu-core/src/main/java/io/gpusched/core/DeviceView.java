package io.gpusched.core;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The JSON shape of one GPU as the console, the node service ({@code GET /api/v1/devices}) and {@code gpusched list}
 * show it: its facts, health, pool, latest metrics and the allocations holding it ({@link AllocationView}s). Plain
 * values; absent values are {@code null}; {@link #toMap()} gives the fields in this order.
 *
 * @param index              device index
 * @param uuid               device UUID
 * @param name               product name
 * @param vendor             {@code NVIDIA} or {@code AMD}
 * @param pciBusId           PCI bus id
 * @param memoryTotalBytes   total memory, or null where the backend could not read it
 * @param memoryUsedBytes    latest memory in use, or null
 * @param utilizationPercent latest utilization, or null
 * @param temperatureCelsius latest temperature, or null
 * @param powerWatts         latest power draw, or null
 * @param health             {@code HEALTHY}, {@code UNHEALTHY} or {@code LOST}
 * @param healthReason       why not healthy, or null
 * @param pool               {@code IN_POOL}, {@code DRAINING} or {@code QUARANTINED}
 * @param poolReason         why draining or quarantined, or null
 * @param reservableBytes    memory still reservable by shared requests (0 when held exclusively), or null when not
 *                           known (an answer of an older service)
 * @param holders            the allocations holding it
 */
public record DeviceView(int index, String uuid, String name, String vendor, String pciBusId, Long memoryTotalBytes,
        Long memoryUsedBytes, Double utilizationPercent, Double temperatureCelsius, Double powerWatts, String health,
        String healthReason, String pool, String poolReason, Long reservableBytes, List<AllocationView> holders) {

    /**
     * Copies the list.
     *
     * @throws NullPointerException when uuid, name, vendor, health, pool or holders is null
     */
    public DeviceView {
        Objects.requireNonNull(uuid, "uuid");
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(vendor, "vendor");
        Objects.requireNonNull(health, "health");
        Objects.requireNonNull(pool, "pool");
        holders = List.copyOf(holders);
    }

    /**
     * @param d           a device as the scheduler holds it
     * @param allocations the node's live allocations (those holding {@code d} become its holders)
     * @param now         the time the view is taken
     * @return its view
     */
    public static DeviceView of(DeviceState d, List<Allocation> allocations, Instant now) {
        GpuDevice g = d.device();
        Optional<GpuMetrics> m = d.metrics();
        List<AllocationView> holders = new ArrayList<>();
        for (Allocation a : allocations) {
            if (a.deviceIndices().contains(d.index())) {
                holders.add(AllocationView.of(a, now));
            }
        }
        return new DeviceView(d.index(), g.uuid(), g.name(), g.vendor().name(), g.pciBusId(),
                g.memoryKnown() ? g.memory().bytes() : null, m.flatMap(GpuMetrics::memoryUsed).map(MemorySize::bytes)
                        .orElse(null),
                m.filter(x -> x.utilizationPercent().isPresent()).map(x -> x.utilizationPercent().getAsDouble())
                        .orElse(null),
                m.filter(x -> x.temperatureCelsius().isPresent()).map(x -> x.temperatureCelsius().getAsDouble())
                        .orElse(null),
                m.filter(x -> x.powerWatts().isPresent()).map(x -> x.powerWatts().getAsDouble()).orElse(null),
                d.health().state().name(), d.health().reason().orElse(null), d.pool().name(),
                d.poolReason().orElse(null), d.reservableMemory().bytes(), holders);
    }

    /**
     * @param devices     the scheduler's devices
     * @param allocations the node's live allocations
     * @param now         the time the views are taken
     * @return their views, in the same order
     */
    public static List<DeviceView> of(List<DeviceState> devices, List<Allocation> allocations, Instant now) {
        List<DeviceView> out = new ArrayList<>(devices.size());
        for (DeviceState d : devices) {
            out.add(of(d, allocations, now));
        }
        return out;
    }

    /** @return the fields, in the documented order, for a JSON writer (holders as {@link AllocationView#toMap()}) */
    public Map<String, Object> toMap() {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("index", index);
        v.put("uuid", uuid);
        v.put("name", name);
        v.put("vendor", vendor);
        v.put("pciBusId", pciBusId);
        v.put("memoryTotalBytes", memoryTotalBytes);
        v.put("memoryUsedBytes", memoryUsedBytes);
        v.put("utilizationPercent", utilizationPercent);
        v.put("temperatureCelsius", temperatureCelsius);
        v.put("powerWatts", powerWatts);
        v.put("health", health);
        v.put("healthReason", healthReason);
        v.put("pool", pool);
        v.put("poolReason", poolReason);
        v.put("reservableBytes", reservableBytes);
        v.put("holders", holders.stream().map(AllocationView::toMap).toList());
        return v;
    }

    /** @return health as people read it: {@code HEALTHY}, or {@code UNHEALTHY (reason)} */
    public String healthText() {
        return healthReason == null ? health : health + " (" + healthReason + ")";
    }

    /** @return the id of the exclusive allocation holding it, if one does */
    public Optional<String> exclusiveHolder() {
        return holders.stream().filter(AllocationView::exclusive).map(AllocationView::id).findFirst();
    }

    /** @return how many shared allocations hold it */
    public int sharedHolders() {
        return (int) holders.stream().filter(h -> !h.exclusive()).count();
    }

    /** @return whether it is in the pool (not draining, not quarantined) */
    public boolean inPool() {
        return pool.equals(DeviceState.Pool.IN_POOL.name());
    }
}
