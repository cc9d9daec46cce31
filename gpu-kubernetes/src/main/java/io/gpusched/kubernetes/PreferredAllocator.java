package io.gpusched.kubernetes;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * Answers one {@code ContainerPreferredAllocationRequest} of one resource with gpusched's
 * {@link TopologyAwareStrategy} over the available ids: the must-include ids are in the answer, and the rest is
 * chosen by the strategy's objective over the node's link matrix (exact; see docs/PERFORMANCE.md). Available ids come
 * in any order; the answer does not depend on it (candidates are taken in node order). Under time-slicing (several ids
 * per GPU) the topology does not apply: the must-include ids, then one id from each GPU with the most ids still
 * available, in node order, round after round (spread over GPUs). Thread-safe.
 */
public final class PreferredAllocator {
    private final Map<String, AdvertisedResource.Entry> byId = new HashMap<>();
    private final List<DeviceState> held;
    private final Map<Integer, Integer> position = new HashMap<>();
    private final GpuTopology topology;
    private final TopologyAwareStrategy strategy;
    private final boolean replicated;
    private final String resource;

    /**
     * @param resource   the resource whose ids are asked for
     * @param node       every device of the node (the inventory's devices, in node order)
     * @param topology   the node's link matrix
     * @param objective  what to maximize
     */
    public PreferredAllocator(AdvertisedResource resource, List<GpuDevice> node, GpuTopology topology,
            TopologyAwareStrategy.Objective objective) {
        for (AdvertisedResource.Entry e : resource.devices()) {
            byId.put(e.id(), e);
        }
        this.resource = resource.name();
        this.topology = topology;
        this.strategy = new TopologyAwareStrategy(objective);
        this.replicated = resource.devices().stream().anyMatch(e -> e.replica() > 0);
        List<DeviceState> states = new ArrayList<>(node.size());
        for (int i = 0; i < node.size(); i++) {
            GpuDevice d = node.get(i);
            position.put(d.index(), i);
            // a device is free in a request's view only when the kubelet offers it
            states.add(new DeviceState(d, GpuHealth.HEALTHY, Optional.of("kubelet"), 0, MemorySize.ZERO,
                    Optional.empty(), DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty()));
        }
        this.held = List.copyOf(states);
    }

    /**
     * @param available   the ids the kubelet may give (any order)
     * @param mustInclude ids the answer must hold (a subset of {@code available})
     * @param size        how many ids to answer, the must-include ones counted
     * @return {@code size} distinct ids out of {@code available}, the must-include ones first
     * @throws InvalidDeviceRequestException for an unknown or repeated id, a must-include id not available, or a size
     *                                       outside {@code [max(1, |mustInclude|), |available|]}
     */
    public List<String> prefer(List<String> available, List<String> mustInclude, int size) {
        List<AdvertisedResource.Entry> avail = entries("available_deviceIDs", available);
        List<AdvertisedResource.Entry> must = entries("must_include_deviceIDs", mustInclude);
        Set<String> availIds = new LinkedHashSet<>(available);
        for (String m : mustInclude) {
            if (!availIds.contains(m)) {
                throw new InvalidDeviceRequestException("must-include device " + InvalidDeviceRequestException.quote(m)
                        + " is not among the "
                        + available.size() + " available devices of " + resource);
            }
        }
        if (size < 1 || size > avail.size() || size < must.size()) {
            throw new InvalidDeviceRequestException("allocation_size " + size + " is out of range for " + resource
                    + ": valid is " + Math.max(1, must.size()) + " to " + avail.size() + " (" + avail.size()
                    + " available, " + must.size() + " must-include)");
        }
        if (size == must.size()) {
            return List.copyOf(mustInclude);
        }
        return replicated ? spread(avail, must, size) : topology(avail, must, size);
    }

    private List<AdvertisedResource.Entry> entries(String field, List<String> ids) {
        List<AdvertisedResource.Entry> out = new ArrayList<>(ids.size());
        Set<String> seen = new HashSet<>();
        for (String id : ids) {
            AdvertisedResource.Entry e = byId.get(id);
            if (e == null) {
                throw new InvalidDeviceRequestException(field + " names device "
                        + InvalidDeviceRequestException.quote(id) + ", which is not a device"
                        + " of " + resource + " (" + byId.size() + " devices, e.g. "
                        + byId.keySet().stream().sorted().findFirst().orElse("none") + ")");
            }
            if (!seen.add(id)) {
                throw new InvalidDeviceRequestException(field + " names device "
                        + InvalidDeviceRequestException.quote(id) + " twice");
            }
            out.add(e);
        }
        return out;
    }

    private List<String> topology(List<AdvertisedResource.Entry> avail, List<AdvertisedResource.Entry> must, int size) {
        DeviceState[] states = held.toArray(new DeviceState[0]);
        int[] free = new int[avail.size()];
        for (int i = 0; i < avail.size(); i++) {
            GpuDevice d = avail.get(i).device();
            int p = position.get(d.index());
            states[p] = DeviceState.idle(d, GpuHealth.HEALTHY);
            free[i] = p;
        }
        Arrays.sort(free);
        List<DeviceState> all = Arrays.asList(states);
        List<DeviceState> candidates = new ArrayList<>(free.length);
        for (int p : free) {
            candidates.add(states[p]);
        }
        List<Integer> required = new ArrayList<>(must.size());
        for (AdvertisedResource.Entry e : must) {
            required.add(e.device().index());
        }
        GpuRequest request = GpuRequest.builder().count(size).requiredDevices(required).build();
        List<Integer> picked = strategy.select(request, new View(all, candidates, topology));
        if (picked.size() != size) {
            throw new IllegalStateException("the topology strategy found no set of " + size + " among "
                    + candidates.size() + " available devices of " + resource);
        }
        Map<Integer, String> idOf = new HashMap<>();
        for (AdvertisedResource.Entry e : avail) {
            idOf.put(e.device().index(), e.id());
        }
        List<String> out = new ArrayList<>(size);
        for (AdvertisedResource.Entry e : must) {
            out.add(e.id());
        }
        for (int index : picked) {
            String id = idOf.get(index);
            if (!out.contains(id)) {
                out.add(id);
            }
        }
        return out;
    }

    private static List<String> spread(List<AdvertisedResource.Entry> avail, List<AdvertisedResource.Entry> must,
            int size) {
        List<String> out = new ArrayList<>(size);
        Set<String> taken = new HashSet<>();
        for (AdvertisedResource.Entry e : must) {
            out.add(e.id());
            taken.add(e.id());
        }
        // per GPU (node order), its available ids not yet taken, replica order
        TreeMap<Integer, ArrayDeque<AdvertisedResource.Entry>> perGpu = new TreeMap<>();
        List<AdvertisedResource.Entry> sorted = new ArrayList<>(avail);
        sorted.sort(Comparator.comparingInt((AdvertisedResource.Entry e) -> e.device().index())
                .thenComparingInt(AdvertisedResource.Entry::replica));
        for (AdvertisedResource.Entry e : sorted) {
            if (!taken.contains(e.id())) {
                perGpu.computeIfAbsent(e.device().index(), k -> new ArrayDeque<>()).add(e);
            }
        }
        while (out.size() < size) {
            int most = perGpu.values().stream().mapToInt(ArrayDeque::size).max().orElse(0);
            for (ArrayDeque<AdvertisedResource.Entry> q : perGpu.values()) {
                if (out.size() < size && q.size() == most) {
                    out.add(q.poll().id());
                }
            }
        }
        return out;
    }

    /** A strategy's view: every node device (held unless offered), the offered ones as candidates. */
    private record View(List<DeviceState> devices, List<DeviceState> candidates, GpuTopology topology)
            implements
                SchedulingView {
        @Override
        public DeviceState device(int index) {
            for (DeviceState d : devices) {
                if (d.index() == index) {
                    return d;
                }
            }
            throw new IllegalArgumentException("GPU index " + index + " is not on this node");
        }

        @Override
        public Instant now() {
            return Instant.EPOCH;
        }
    }
}
