package io.gpusched.core;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

/** Builds {@link SchedulerStatus} values from device states and allocations. */
final class Statuses {
    private Statuses() {
    }

    static SchedulerStatus of(String backend, boolean enabled, String strategy, Instant at, List<DeviceState> devs,
            List<Allocation> allocs, boolean drainSupported, List<String> notes) {
        List<SchedulerStatus.Device> out = devices(devs, allocs);
        List<SchedulerStatus.Held> held = new ArrayList<>();
        for (Allocation a : allocs) {
            held.add(new SchedulerStatus.Held(a.id(), a.owner().orElse(null), a.request().jobId().orElse(null),
                    a.deviceIndices(), a.deviceUuids(), a.sharing().name(),
                    a.sharedMemory().map(MemorySize::bytes).orElse(null), a.createdAt().toString(),
                    a.request().labels(), a.expiresAt().map(Instant::toString).orElse(null),
                    a.placement().describe(), Leases.expired(a, at), a.request().jobCgroup().orElse(null)));
        }
        return new SchedulerStatus(backend, enabled, strategy, at.toString(), out, held, drainSupported, notes);
    }

    static List<SchedulerStatus.Device> devices(List<DeviceState> devs, List<Allocation> allocs) {
        Map<Integer, List<String>> sharedBy = new HashMap<>();
        for (Allocation a : allocs) {
            if (a.sharing() == SharingMode.SHARED) {
                for (int i : a.deviceIndices()) {
                    sharedBy.computeIfAbsent(i, k -> new ArrayList<>()).add(a.id());
                }
            }
        }
        List<SchedulerStatus.Device> out = new ArrayList<>();
        for (DeviceState s : devs) {
            GpuDevice d = s.device();
            Optional<GpuMetrics> m = s.metrics();
            out.add(new SchedulerStatus.Device(d.index(), d.uuid(), d.name(), d.vendor().name(), d.memory().bytes(),
                    s.reservableMemory().bytes(), s.health().state().name(), s.health().reason().orElse(null),
                    s.exclusiveHolder().orElse(null), sharedBy.getOrDefault(d.index(), List.of()),
                    m.flatMap(x -> boxed(x.utilizationPercent())).orElse(null),
                    m.flatMap(GpuMetrics::memoryUsed).map(MemorySize::bytes).orElse(null),
                    m.flatMap(x -> boxed(x.temperatureCelsius())).orElse(null),
                    m.flatMap(x -> boxed(x.powerWatts())).orElse(null), s.pool().name(),
                    s.poolReason().orElse(null)));
        }
        return out;
    }

    private static Optional<Double> boxed(OptionalDouble d) {
        return d.isPresent() ? Optional.of(d.getAsDouble()) : Optional.empty();
    }
}
