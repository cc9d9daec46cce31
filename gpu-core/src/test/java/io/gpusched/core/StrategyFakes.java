package io.gpusched.core;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/** A {@link SchedulingView} built by hand, to test strategies without a scheduler. */
final class StrategyFakes {
    private StrategyFakes() {
    }

    /** @return n plain NVIDIA devices, index i on NUMA node {@code numa[i]} */
    static List<GpuDevice> devices(int n, int[] numa) {
        List<GpuDevice> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(GpuDevice.builder().index(i).uuid("GPU-f-" + i).vendor(GpuVendor.NVIDIA).name("X")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("b" + i).numaNode(numa[i]).minor(i).build());
        }
        return out;
    }

    /** @return a view where {@code busy} devices are held exclusively and every other device is a candidate */
    static SchedulingView view(List<GpuDevice> devices, GpuTopology topology, Set<Integer> busy) {
        List<DeviceState> all = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : devices) {
            DeviceState s = DeviceState.idle(d, GpuHealth.HEALTHY);
            if (busy.contains(d.index())) {
                s = s.withExclusive(Optional.of("held"));
            } else {
                cands.add(s);
            }
            all.add(s);
        }
        return view(all, cands, topology);
    }

    static SchedulingView view(List<DeviceState> all, List<DeviceState> cands, GpuTopology topology) {
        List<DeviceState> a = List.copyOf(all);
        List<DeviceState> c = List.copyOf(cands);
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return a;
            }

            @Override
            public List<DeviceState> candidates() {
                return c;
            }

            @Override
            public DeviceState device(int index) {
                return a.stream().filter(d -> d.index() == index).findFirst()
                        .orElseThrow(() -> new IllegalArgumentException("no device " + index));
            }

            @Override
            public GpuTopology topology() {
                return topology;
            }

            @Override
            public Instant now() {
                return Instant.parse("2026-01-01T00:00:00Z");
            }
        };
    }
}
