package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.GpuAllocationException.Obstacle;
import io.gpusched.core.GpuAllocationException.Reason;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

/**
 * Placement: filters the devices a request may use, step by step so that a refusal names the first constraint that
 * could not be met, asks the strategy to pick among them, and checks the pick. Pure: works on a list of states.
 */
final class Placement {
    private final AllocationStrategy strategy;
    private final GpuTopology topology;
    /** Most shared allocations one GPU takes ({@code gpu.max_shared_per_gpu}); 0: no bound. */
    private final int maxShared;

    Placement(AllocationStrategy strategy, GpuTopology topology) {
        this(strategy, topology, 0);
    }

    Placement(AllocationStrategy strategy, GpuTopology topology, int maxShared) {
        this.strategy = strategy;
        this.topology = topology;
        this.maxShared = maxShared;
    }

    /**
     * A strategy's checked choice on one snapshot of the node.
     *
     * @param devices the devices
     * @param quality the strategy's certificate, for {@code basis}
     * @param basis   the device states it was decided on
     */
    record Pick(List<GpuDevice> devices, PlacementQuality quality, List<DeviceState> basis) {
    }

    /**
     * @return the devices the strategy chose, checked
     * @throws GpuAllocationException when the request cannot be placed on these states now
     * @throws GpuException when the strategy returns an invalid pick (a bug in the strategy)
     */
    List<GpuDevice> place(GpuRequest request, List<DeviceState> all, Instant now) {
        return pick(request, all, now).devices();
    }

    /**
     * Decides on an immutable list of states: safe to run without any lock (the scheduler runs it outside its lock and
     * {@link #revalidate re-validates} the pick under it).
     *
     * @return the strategy's checked choice and certificate
     * @throws GpuAllocationException when the request cannot be placed on these states
     * @throws GpuException when the strategy returns an invalid pick (a bug in the strategy)
     */
    Pick pick(GpuRequest request, List<DeviceState> all, Instant now) {
        List<DeviceState> candidates = request.isExplicit() ? explicitCandidates(request, all, maxShared)
                : candidates(request, all, maxShared);
        View view = new View(all, Collections.unmodifiableList(candidates), topology, now);
        AllocationStrategy.Choice choice = strategy.choose(request, view);
        List<Integer> picked = choice == null ? null : choice.devices();
        if (picked == null || picked.isEmpty()) {
            throw new GpuAllocationException(Reason.NO_PLACEMENT, "strategy " + strategy.name()
                    + " found no placement for " + request.describe() + " among " + candidates.size()
                    + " eligible GPUs " + indices(candidates));
        }
        return new Pick(checkPick(request, candidates, picked), choice.quality(), all);
    }

    /**
     * Re-validates a pick made on an older snapshot against the latest states (the caller holds the lock): every
     * picked device must still be a candidate of the request (free, healthy, in the pool, with the memory asked).
     *
     * @return the pick's devices when still valid, else null (decide again)
     * @throws GpuAllocationException when the request cannot be placed on the latest states at all
     */
    List<GpuDevice> revalidate(GpuRequest request, List<DeviceState> latest, Pick pick) {
        if (latest == pick.basis()) {
            return pick.devices(); // no device changed since the snapshot (the state shares its immutable view)
        }
        List<DeviceState> candidates = request.isExplicit() ? explicitCandidates(request, latest, maxShared)
                : candidates(request, latest, maxShared);
        for (GpuDevice d : pick.devices()) {
            DeviceState now = find(candidates, d.index());
            if (now == null || !now.device().uuid().equals(d.uuid())) {
                return null;
            }
        }
        return pick.devices();
    }

    /**
     * Checks the strategy's pick: distinct candidate indices, as many as asked, the required ones included. The pick is
     * read once (a strategy's list may change between reads, or hold a non-Integer through an unchecked cast), and
     * the check and the answer both come from that one reading.
     */
    private List<GpuDevice> checkPick(GpuRequest request, List<DeviceState> candidates, List<Integer> pickedList) {
        Object[] picked = pickedList.toArray();
        int n = picked.length;
        List<GpuDevice> chosen = n == request.count() ? new ArrayList<>(n) : null;
        for (int k = 0; chosen != null && k < n; k++) {
            DeviceState d = picked[k] instanceof Integer i ? find(candidates, i) : null;
            for (int j = 0; d != null && j < k; j++) {
                if (picked[k].equals(picked[j])) {
                    d = null;
                }
            }
            if (d == null) {
                chosen = null;
            } else {
                chosen.add(d.device());
            }
        }
        for (int r = 0, size = request.requiredDevices().size(); chosen != null && r < size; r++) {
            Integer required = request.requiredDevices().get(r);
            boolean in = false;
            for (int k = 0; !in && k < n; k++) {
                in = required.equals(picked[k]);
            }
            if (!in) {
                chosen = null;
            }
        }
        if (chosen == null) {
            throw new GpuException("strategy " + strategy.name() + " returned " + Arrays.toString(picked)
                    + " for " + request.describe() + "; it must return " + request.count() + " distinct indices out of "
                    + indices(candidates) + (request.requiredDevices().isEmpty() ? ""
                            : ", including the required " + request.requiredDevices())
                    + " (a bug in the strategy; nothing was allocated)");
        }
        return chosen;
    }

    private static DeviceState find(List<DeviceState> in, int index) {
        for (int k = 0, size = in.size(); k < size; k++) {
            DeviceState d = in.get(k);
            if (d.index() == index) {
                return d;
            }
        }
        return null;
    }

    /**
     * @return the devices the request may use now, in node order
     * @throws GpuAllocationException naming the first hard constraint that could not be met
     */
    static List<DeviceState> candidates(GpuRequest r, List<DeviceState> all) {
        return candidates(r, all, 0);
    }

    /**
     * @param maxShared most shared allocations a GPU takes; 0: no bound
     * @return the devices the request may use now, in node order
     * @throws GpuAllocationException naming the first hard constraint that could not be met
     */
    static List<DeviceState> candidates(GpuRequest r, List<DeviceState> all, int maxShared) {
        // the common case in one pass; when it comes short, the step-by-step pass below names why
        if (r.count() <= all.size()) {
            List<DeviceState> free = new ArrayList<>(all.size());
            for (int k = 0, size = all.size(); k < size; k++) {
                DeviceState d = all.get(k);
                if (eligible(r, d, maxShared)) {
                    free.add(d);
                }
            }
            if (free.size() >= r.count() && containsRequired(free, r.requiredDevices())) {
                return free;
            }
        }
        return candidatesStepByStep(r, all, maxShared);
    }

    /** The conjunction of every constraint {@link #candidatesStepByStep} and {@link #checkOne} apply, in one test. */
    private static boolean eligible(GpuRequest r, DeviceState d, int maxShared) {
        return d.pool() == Pool.IN_POOL && d.health().isHealthy() && isAvailable(r, d, maxShared)
                && hasMemory(r, d.device()) && matchesIdentity(r, d.device());
    }

    private static boolean containsRequired(List<DeviceState> free, List<Integer> required) {
        for (int i = 0, n = required.size(); i < n; i++) {
            if (find(free, required.get(i)) == null) {
                return false;
            }
        }
        return true;
    }

    /** Applies hard constraints step by step, so that a refusal names the first one that could not be met. */
    static List<DeviceState> candidatesStepByStep(GpuRequest r, List<DeviceState> all, int maxShared) {
        int n = r.count();
        if (n > all.size()) {
            throw new GpuAllocationException(Reason.NODE_TOO_SMALL, r.describe() + " requested; this node has "
                    + all.size() + (all.size() == 1 ? " GPU" : " GPUs") + " in all, so it can never be served here");
        }
        for (int req : r.requiredDevices()) {
            DeviceState d = all.stream().filter(x -> x.index() == req).findFirst()
                    .orElseThrow(() -> new GpuAllocationException(Reason.UNKNOWN_DEVICE, "required GPU index " + req
                            + " is not on this node; its GPU indices are " + indices(all)));
            checkOne(r, d, maxShared);
        }
        List<DeviceState> matching = filter(all, d -> matchesIdentity(r, d.device()));
        if (matching.size() < n) {
            throw new GpuAllocationException(Reason.NO_MATCHING_DEVICE, r.describe() + " requested; "
                    + matching.size() + " of the node's " + all.size() + " GPUs match (the node has "
                    + inventorySummary(all) + ")");
        }
        List<DeviceState> roomy = filter(matching, d -> hasMemory(r, d.device()));
        if (roomy.size() < n) {
            long unknown = matching.stream().filter(d -> !d.device().memoryKnown()).count();
            MemorySize largest = matching.stream().map(d -> d.device().memory()).max(MemorySize::compareTo).get();
            long free = matching.stream().filter(d -> d.isIdle() && d.isAllocatable()).count();
            throw new GpuAllocationException(Reason.INSUFFICIENT_MEMORY, r.describe() + " requested; "
                    + free + " free, " + (roomy.isEmpty() ? "none has" : "only " + roomy.size() + " of "
                            + matching.size() + " matching have")
                    + " enough memory (the largest has "
                    + largest.toHumanString() + ")" + (unknown > 0 ? "; the memory size of " + unknown
                            + " GPU(s) is unknown (the backend could not read it),"
                            + " so they take no memory-constrained request"
                            : ""));
        }
        List<DeviceState> usable = filter(roomy, d -> d.health().isHealthy() && d.pool() != Pool.QUARANTINED);
        if (usable.size() < n) {
            List<Obstacle> sick = new ArrayList<>();
            for (DeviceState d : roomy) {
                if (!d.health().isHealthy() || d.pool() == Pool.QUARANTINED) {
                    sick.add(Refusals.of(d, true));
                }
            }
            throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, r.describe() + " requested; only "
                    + usable.size() + " of " + roomy.size() + " suitable GPUs are healthy ("
                    + Refusals.summary(sick) + ")", sick);
        }
        List<DeviceState> free = filter(usable, d -> d.pool() == Pool.IN_POOL && isAvailable(r, d, maxShared));
        if (free.size() < n) {
            String why = r.sharing() == SharingMode.SHARED
                    ? " have " + r.sharedMemory().get().toHumanString() + " unreserved and are not held exclusively"
                            + (maxShared > 0 ? " or shared " + maxShared + " times already (gpu.max_shared_per_gpu)"
                                    : "")
                    : " are free";
            List<Obstacle> blocking = new ArrayList<>();
            List<Obstacle> held = new ArrayList<>();
            for (DeviceState d : usable) {
                Obstacle o = Refusals.of(d, d.pool() == Pool.IN_POOL && isAvailable(r, d, maxShared));
                if (o != null) {
                    blocking.add(o);
                    if (o.kind() != Obstacle.Kind.DRAINING) {
                        held.add(o);
                    }
                }
            }
            long draining = blocking.size() - held.size();
            long cordoned = usable.stream().filter(d -> d.pool() == Pool.CORDONED).count();
            throw new GpuAllocationException(Reason.INSUFFICIENT_GPUS, r.describe() + " requested; "
                    + free.size() + " of " + usable.size() + " suitable GPUs" + why + " (held: "
                    + Refusals.summary(held) + (draining > 0 ? "; " + draining + " draining" : "")
                    + (cordoned > 0 ? "; " + cordoned + " drained by an admin" : "") + ")", blocking);
        }
        return free;
    }

    static List<DeviceState> explicitCandidates(GpuRequest r, List<DeviceState> all, int maxShared) {
        List<DeviceState> out = new ArrayList<>();
        if (!r.deviceIndices().isEmpty()) {
            for (int i : r.deviceIndices()) {
                out.add(all.stream().filter(x -> x.index() == i).findFirst()
                        .orElseThrow(() -> new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU index " + i
                                + " is not on this node; its GPU indices are " + indices(all))));
            }
        } else {
            for (String u : r.deviceUuids()) {
                out.add(all.stream().filter(x -> x.device().uuid().equals(u)).findFirst().orElseThrow(
                        () -> new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU " + u + " is not on this node; its"
                                + " GPUs are " + Refusals.names(all.size(), k -> all.get(k).device().uuid()))));
            }
        }
        for (DeviceState d : out) {
            checkOne(r, d, maxShared);
        }
        return out;
    }

    /** Checks one named device (explicit or required) and refuses naming it. */
    private static void checkOne(GpuRequest r, DeviceState d, int maxShared) {
        String which = "GPU " + d.index() + " (" + d.device().name() + ", " + d.device().uuid() + ")";
        if (!matchesIdentity(r, d.device())) {
            throw new GpuAllocationException(Reason.NO_MATCHING_DEVICE, which + " does not match " + r.describe());
        }
        if (!hasMemory(r, d.device())) {
            throw new GpuAllocationException(Reason.INSUFFICIENT_MEMORY, which + (d.device().memoryKnown()
                    ? " has " + d.device().memory().toHumanString()
                    : "'s memory size is unknown (the backend could not read it), so it takes no request with a"
                            + " memory constraint")
                    + "; " + r.describe() + " requested");
        }
        if (!d.health().isHealthy()) {
            throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, which + " is " + d.health(),
                    List.of(Refusals.of(d, false)));
        }
        if (d.pool() == Pool.QUARANTINED) {
            throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, which + " is quarantined: "
                    + d.poolReason().orElse(""), List.of(Refusals.of(d, false)));
        }
        if (d.pool() == Pool.CORDONED) {
            throw new GpuAllocationException(Reason.DEVICE_BUSY, which + " is out of service (drained by an admin: "
                    + d.poolReason().orElse("no reason given") + "); an admin undrains it");
        }
        if (d.pool() == Pool.DRAINING) {
            throw new GpuAllocationException(Reason.DEVICE_BUSY, which + " is draining: "
                    + d.poolReason().orElse("processes of its last job are still exiting"),
                    List.of(Refusals.of(d, false)));
        }
        if (!isAvailable(r, d, maxShared)) {
            Obstacle o = Refusals.of(d, false);
            List<Obstacle> busy = o == null ? List.of() : List.of(o);
            throw new GpuAllocationException(Reason.DEVICE_BUSY, which + " is busy: " + Refusals.summary(busy)
                    + (r.sharing() == SharingMode.SHARED ? "; " + d.reservableMemory().toHumanString()
                            + " reservable" + (maxShared > 0 && d.sharedHolders() >= maxShared ? "; it takes at most "
                                    + maxShared + " shared allocations (gpu.max_shared_per_gpu)" : "")
                            : ""),
                    busy);
        }
    }

    static boolean matchesIdentity(GpuRequest r, GpuDevice d) {
        if (r.vendor().isPresent() && r.vendor().get() != d.vendor()) {
            return false;
        }
        if (r.modelPattern().isPresent() && !r.matchesModel(d.name())) {
            return false;
        }
        if (r.minComputeCapability().isPresent()) {
            return d.computeCapability().isPresent() && d.computeCapability().get().isAtLeast(
                    r.minComputeCapability().get());
        }
        return true;
    }

    /** A device whose memory size is unknown takes no request with a memory constraint (unknown is not zero). */
    static boolean hasMemory(GpuRequest r, GpuDevice d) {
        if (!d.memoryKnown()) {
            return r.minMemory().isEmpty() && r.sharedMemory().isEmpty();
        }
        return (r.minMemory().isEmpty() || d.memory().isAtLeast(r.minMemory().get()))
                && (r.sharedMemory().isEmpty() || d.memory().isAtLeast(r.sharedMemory().get()));
    }

    /** @param maxShared most shared allocations a GPU takes; 0: no bound */
    static boolean isAvailable(GpuRequest r, DeviceState d, int maxShared) {
        if (r.sharing() == SharingMode.EXCLUSIVE) {
            return d.isIdle();
        }
        return d.exclusiveHolder().isEmpty() && d.reservableMemory().isAtLeast(r.sharedMemory().get())
                && (maxShared <= 0 || d.sharedHolders() < maxShared);
    }

    private static List<DeviceState> filter(List<DeviceState> in, Predicate<DeviceState> p) {
        List<DeviceState> out = new ArrayList<>(in.size());
        for (DeviceState d : in) {
            if (p.test(d)) {
                out.add(d);
            }
        }
        return out;
    }

    /** @return the node's GPU indices, every one on a small node, in runs past a few */
    static String indices(List<DeviceState> states) {
        return Refusals.ids(states.stream().map(DeviceState::index).toList());
    }

    private static String inventorySummary(List<DeviceState> all) {
        Map<String, Integer> kinds = new LinkedHashMap<>();
        for (DeviceState d : all) {
            GpuDevice g = d.device();
            String k = (g.name().toUpperCase(Locale.ROOT).startsWith(g.vendor().name()) ? "" : g.vendor() + " ")
                    + g.name() + " " + (g.memoryKnown() ? g.memory().toHumanString() : "memory unknown")
                    + g.computeCapability().map(c -> " cc " + c).orElse("")
                    + g.architecture().map(a -> " " + a).orElse("");
            kinds.merge(k, 1, Integer::sum);
        }
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, Integer> e : kinds.entrySet()) {
            if (parts.size() == Refusals.LIST_ALL) {
                parts.add("and " + (kinds.size() - Refusals.LIST_ALL) + " other kinds");
                break;
            }
            parts.add(e.getValue() + "x " + e.getKey());
        }
        return String.join(", ", parts);
    }

    /** The immutable view handed to strategies. */
    private record View(List<DeviceState> devices, List<DeviceState> candidates, GpuTopology topology, Instant now)
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
    }
}
