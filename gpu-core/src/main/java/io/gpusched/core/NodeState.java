package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.LedgerRecord.Allocated;
import io.gpusched.core.LedgerRecord.Cause;
import io.gpusched.core.LedgerRecord.PoolChanged;
import io.gpusched.core.LedgerRecord.Released;
import io.gpusched.core.LedgerRecord.Renewed;
import io.gpusched.core.LedgerRecord.Snapshot;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The node's allocation state as this process knows it: device states and live allocations, plus the sequence of
 * the last ledger record applied. Changed only by {@link #apply} (ledger records, the same for every process) and by
 * process-local facts (health, metrics). Not thread-safe: the {@link Ledger} guards it.
 */
final class NodeState {
    private final Map<String, Integer> positionByUuid;
    private final Map<Integer, Integer> positionByIndex;
    private final DeviceState[] states;
    /** {@link #snapshot()} until a device state changes (strategies and readers share it; it is immutable). */
    private List<DeviceState> view;
    final LinkedHashMap<String, Allocation> live;
    /** Allocations bound to a holder process (a subset of live). */
    int bound;
    /** Allocations with a lease (a subset of live). */
    int leased;
    /** Ids of live allocations whose lease ends them ({@link Allocated#releaseOnExpiry()}). */
    Set<String> releaseOnExpiry;
    long sequence;
    /** Problems met while applying records (devices the inventory no longer has). */
    final List<String> problems;
    /** Which sequences were allocations; shared with rollback copies (see {@link IssuedIds}). */
    IssuedIds issued;

    NodeState(List<DeviceState> initial) {
        this.states = initial.toArray(new DeviceState[0]);
        this.positionByUuid = new HashMap<>();
        this.positionByIndex = new HashMap<>();
        for (int i = 0; i < states.length; i++) {
            positionByUuid.put(states[i].device().uuid(), i);
            positionByIndex.put(states[i].index(), i);
        }
        this.live = new LinkedHashMap<>();
        this.problems = new ArrayList<>();
        this.issued = new IssuedIds();
        this.releaseOnExpiry = new HashSet<>();
    }

    private NodeState(NodeState o) {
        this.positionByUuid = o.positionByUuid;
        this.positionByIndex = o.positionByIndex;
        this.states = Arrays.copyOf(o.states, o.states.length);
        this.view = o.view;
        this.live = new LinkedHashMap<>(o.live);
        this.bound = o.bound;
        this.leased = o.leased;
        this.releaseOnExpiry = new HashSet<>(o.releaseOnExpiry);
        this.sequence = o.sequence;
        this.problems = new ArrayList<>(o.problems);
        this.issued = o.issued;
    }

    /** @return a copy to roll back to */
    NodeState copy() {
        return new NodeState(this);
    }

    /** @return a state with the same devices (health and metrics kept) and nothing allocated, at sequence 0 */
    NodeState emptied() {
        List<DeviceState> idle = new ArrayList<>();
        for (DeviceState s : states) {
            idle.add(DeviceState.idle(s.device(), s.health()).withMetrics(s.metrics()));
        }
        return new NodeState(idle);
    }

    /** @return whether a transaction must look for allocations to end (a bound holder may be gone, a lease may end) */
    boolean needsHousekeeping() {
        return bound > 0 || leased > 0;
    }

    /** @return whether the allocation's lease ends it (the allocating process had release_on_expiry) */
    boolean releasesOnExpiry(String id) {
        return releaseOnExpiry.contains(id);
    }

    Integer positionOfIndex(int index) {
        return positionByIndex.get(index);
    }

    Integer positionOfUuid(String uuid) {
        return positionByUuid.get(uuid);
    }

    /** @return the state of the device at this position */
    DeviceState state(int position) {
        return states[position];
    }

    /** Replaces the state of the device at this position. */
    void set(int position, DeviceState s) {
        states[position] = s;
        view = null;
    }

    /** @return the device states in position order, immutable (computed once per change) */
    List<DeviceState> snapshot() {
        List<DeviceState> v = view;
        if (v == null) {
            v = List.of(states);
            view = v;
        }
        return v;
    }

    /**
     * Applies one record at {@code seq}.
     *
     * @param events where the events it causes go (may be null)
     */
    void apply(long seq, LedgerRecord r, List<AllocationEvent> events) {
        issued.mark(seq, r instanceof Allocated);
        if (r instanceof Allocated a) {
            Allocation al = hold(a);
            if (events != null) {
                events.add(new AllocationEvent(AllocationEvent.Type.ALLOCATED, al.createdAt(), Optional.of(al.id()),
                        al.owner(), al.request().jobId(), al.deviceUuids(), Optional.empty(), al.request().describe()
                                + (al.placement().rated() ? "; placement " + al.placement().describe() : "")));
            }
        } else if (r instanceof Released x) {
            Allocation al = live.remove(x.id());
            if (al != null) {
                unhold(al, x);
                if (events != null && x.cause() == Cause.EXPIRED) {
                    events.add(new AllocationEvent(AllocationEvent.Type.EXPIRED, x.at(), Optional.of(al.id()),
                            al.owner(), al.request().jobId(), al.deviceUuids(), Optional.empty(), "lease of "
                                    + al.id() + " ended at " + al.expiresAt().map(Instant::toString).orElse("?")
                                    + "; released"));
                }
                if (events != null) {
                    boolean reclaimed = x.cause() == Cause.RECLAIMED;
                    String msg = reclaimed ? al.request().describe() + "; reclaimed: its holder "
                            + x.deadHolder().map(HolderProcess::toString).orElse("?") + " is gone"
                            : x.cause() == Cause.EXPIRED ? al.request().describe() + "; released: its lease ended"
                            : al.request().describe();
                    events.add(new AllocationEvent(reclaimed ? AllocationEvent.Type.RECLAIMED
                            : AllocationEvent.Type.RELEASED, x.at(), Optional.of(al.id()), al.owner(),
                            al.request().jobId(), al.deviceUuids(), Optional.empty(), msg));
                }
            }
        } else if (r instanceof LedgerRecord.JobCgroup j) {
            Allocation al = live.get(j.id());
            if (al != null) {
                live.put(j.id(), new Allocation(al.id(), al.devices(), al.request().withJobCgroup(j.cgroup()),
                        al.createdAt(), al.expiresAt(), al.placement()));
            }
        } else if (r instanceof LedgerRecord.JobProcess j) {
            Allocation al = live.get(j.id());
            if (al != null) {
                live.put(j.id(), new Allocation(al.id(), al.devices(), al.request().withJobProcess(j.process()),
                        al.createdAt(), al.expiresAt(), al.placement()));
            }
        } else if (r instanceof Renewed x) {
            Allocation al = live.get(x.id());
            if (al != null) {
                if (al.expiresAt().isEmpty()) {
                    leased++;
                }
                Allocation n = al.withExpiry(Optional.of(x.expiresAt()));
                live.put(x.id(), n);
                if (events != null) {
                    events.add(new AllocationEvent(AllocationEvent.Type.RENEWED, x.expiresAt(), Optional.of(x.id()),
                            n.owner(), n.request().jobId(), n.deviceUuids(), Optional.empty(),
                            "lease now ends at " + x.expiresAt()));
                }
            }
        } else if (r instanceof PoolChanged p) {
            Integer pos = positionByUuid.get(p.uuid());
            if (pos != null) {
                DeviceState cur = states[pos];
                set(pos, p.pool() == Pool.IN_POOL ? cur.withPool(Pool.IN_POOL, Optional.empty(), Optional.empty())
                        : cur.withPool(p.pool(), p.reason(), p.since()));
                if (events != null && cur.pool() != p.pool()) {
                    AllocationEvent.Type t = p.pool() == Pool.QUARANTINED ? AllocationEvent.Type.QUARANTINED
                            : p.pool() == Pool.IN_POOL ? AllocationEvent.Type.DRAINED : null;
                    if (t != null) {
                        events.add(new AllocationEvent(t, p.since().orElse(Instant.EPOCH), Optional.empty(),
                                Optional.empty(), Optional.empty(), List.of(p.uuid()), Optional.empty(),
                                "GPU " + cur.index() + (t == AllocationEvent.Type.DRAINED
                                        ? " is back in the pool" + p.reason().map(s -> " (" + s + ")").orElse("")
                                        : " quarantined: " + p.reason().orElse(""))));
                    }
                }
            }
        } else if (r instanceof Snapshot s) {
            Optional<IssuedIds> known = s.issued().flatMap(IssuedIds::decode);
            if (known.isPresent()) {
                issued = known.get();
            } else {
                issued.unknownUpTo(seq);
            }
            for (Allocated a : s.live()) {
                hold(a);
            }
            for (PoolChanged p : s.pools()) {
                apply(seq, p, null);
            }
        }
        sequence = seq;
    }

    private Allocation hold(Allocated a) {
        List<GpuDevice> devs = new ArrayList<>(a.uuids().size());
        int[] positions = new int[a.uuids().size()];
        int held = 0;
        for (String uuid : a.uuids()) {
            Integer p = positionByUuid.get(uuid);
            if (p == null) {
                problems.add("allocation " + a.id() + " holds GPU " + uuid + ", which this process's inventory does"
                        + " not have");
            } else {
                devs.add(states[p].device());
                positions[held++] = p;
            }
        }
        Allocation al = new Allocation(a.id(), devs, a.request(), a.createdAt(), a.expiresAt(), a.placement());
        for (int k = 0; k < held; k++) {
            int p = positions[k];
            DeviceState s = states[p];
            if (al.sharing() == SharingMode.EXCLUSIVE) {
                set(p, s.withExclusive(Optional.of(al.id())));
            } else {
                set(p, s.withShared(s.sharedHolders() + 1, s.sharedReserved().plus(al.sharedMemory().get())));
            }
        }
        live.put(al.id(), al);
        if (al.request().holder().isPresent()) {
            bound++;
        }
        if (al.expiresAt().isPresent()) {
            leased++;
        }
        if (a.releaseOnExpiry() && a.expiresAt().isPresent()) {
            releaseOnExpiry.add(al.id());
        }
        return al;
    }

    private void unhold(Allocation a, Released x) {
        if (a.request().holder().isPresent()) {
            bound--;
        }
        if (a.expiresAt().isPresent()) {
            leased--;
        }
        releaseOnExpiry.remove(a.id());
        for (GpuDevice d : a.devices()) {
            int p = positionByUuid.get(d.uuid());
            DeviceState s = states[p];
            if (a.sharing() == SharingMode.EXCLUSIVE) {
                s = s.withExclusive(Optional.empty());
            } else {
                MemorySize left = s.sharedReserved().minusOrZero(a.sharedMemory().get());
                s = s.withShared(Math.max(0, s.sharedHolders() - 1), s.sharedHolders() <= 1 ? MemorySize.ZERO : left);
            }
            if (x.drain().contains(d.uuid()) && s.isIdle() && s.pool() == Pool.IN_POOL) {
                s = s.withPool(Pool.DRAINING, Optional.of("released by " + a.id()
                        + "; waiting for its processes to exit"), Optional.of(x.at()));
            }
            set(p, s);
        }
    }

    /**
     * Ends a live allocation in this state only, as its release would (a reader's view of a lease that ends it; the
     * next writer records the release): no sequence is used, nothing is written.
     */
    void endInView(String id, Instant at) {
        Allocation al = live.remove(id);
        if (al != null) {
            unhold(al, new Released(id, Cause.EXPIRED, at, List.of(), Optional.empty()));
        }
    }

    /** @return the snapshot record of this state */
    Snapshot toSnapshot() {
        List<Allocated> out = new ArrayList<>();
        for (Allocation a : live.values()) {
            out.add(new Allocated(a.id(), a.deviceUuids(), a.request(), a.createdAt(), a.expiresAt(), a.placement(),
                    releaseOnExpiry.contains(a.id())));
        }
        List<PoolChanged> pools = new ArrayList<>();
        for (DeviceState s : states) {
            if (s.pool() != Pool.IN_POOL) {
                pools.add(new PoolChanged(s.device().uuid(), s.pool(), s.poolReason(), s.poolSince()));
            }
        }
        return new Snapshot(out, pools, Optional.of(issued.encode(sequence)));
    }

    /**
     * @param id an allocation id
     * @param prefix the node's id prefix
     * @return whether the node issued it: {@code <prefix>-<n>} with {@code n} in canonical decimal (no sign, no
     *         leading zero) the sequence of an allocation record
     */
    boolean issued(String id, String prefix) {
        String head = prefix + "-";
        if (!id.startsWith(head) || id.length() == head.length() || id.length() > head.length() + 18) {
            return false;
        }
        String num = id.substring(head.length());
        if (num.charAt(0) == '0' || !num.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return false;
        }
        return issued.issued(Long.parseLong(num), sequence);
    }
}
