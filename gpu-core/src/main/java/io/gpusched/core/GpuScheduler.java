package io.gpusched.core;

import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;

/**
 * Hands out the GPUs of one {@link GpuInventory}. Thread-safe; an allocation either fully happens or leaves no trace.
 * With a {@linkplain Builder#stateDir(java.nio.file.Path) state directory} every process of the node shares one
 * allocation state (the node ledger): each change takes the node's lock, catches up with other
 * processes, decides, appends and forces to disk before it returns; ids are unique across the node and restarts.
 * Without one, the scheduler is purely in memory.
 * It never calls native code on the allocation path: it works from the inventory's cached facts and the latest
 * metrics given to {@link #updateMetrics(GpuSample)} (or read by its own poller, see
 * {@link Builder#metricsPollInterval(Duration)}).
 *
 * <pre>{@code
 * try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
 *      GpuScheduler s = GpuScheduler.builder().inventory(inv).build()) {
 *     Allocation a = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--gpu-memory=16GB"));
 *     s.release(a.id());
 * }
 * }</pre>
 */
public interface GpuScheduler extends AutoCloseable {

    /**
     * Allocates devices for a request.
     *
     * @return the allocation
     * @throws GpuAllocationException with a {@link GpuAllocationException.Reason} and a message saying what was
     *                                asked and what the node has; the scheduler's state is unchanged
     */
    Allocation allocate(GpuRequest request);

    /**
     * Allocates, waiting up to {@code maxWait} for devices being released or drained. A request that cannot succeed
     * however long it waits (a permanent reason, e.g. more GPUs than the node has) fails at once.
     *
     * <p>Fairness: within one process, waiters are served first come, first served (only the oldest waiter tries;
     * a waiter that fails for any reason, or times out, hands the queue on). Across processes sharing a node ledger
     * the node keeps one first-come-first-served queue: a process's oldest waiter refused for a transient reason
     * (other than {@code RATE_LIMITED}) takes a ticket in the state directory, younger than every ticket present;
     * while live tickets exist only the waiter with the oldest one may allocate, and every other allocation on the
     * node (waiting or not, of any process) is refused with {@code INSUFFICIENT_GPUS}. This is strict FIFO with
     * head-of-line blocking: an earlier waiter for many GPUs holds back later requests that would fit now. The next
     * waiter of a process queues behind the tickets present, so processes take turns and none starves. Waiters wake
     * when the ledger or the set of live tickets changes (polled with a 1 to 50 ms backoff). Tickets of dead
     * processes, and tickets more than 10 s past their waiter's deadline, are skipped and removed; a waiter's ticket
     * goes when it is served, gives up, fails or is interrupted, or when its scheduler is closed.
     *
     * @throws GpuAllocationException with the last transient reason and the wait observed, when the wait runs out
     */
    Allocation allocate(GpuRequest request, Duration maxWait) throws InterruptedException;

    /**
     * Extends a lease: the allocation now expires {@code duration} from now (scheduler clock).
     *
     * @return the allocation with its new expiry
     * @throws GpuAllocationException with {@code UNKNOWN_ALLOCATION} for an id that is not live
     */
    Allocation renew(String allocationId, Duration duration);

    /**
     * Housekeeping off the allocation path: reports expired leases (and releases them when configured), and moves
     * draining devices back to the pool once their processes are gone, or into quarantine after the drain timeout.
     * Runs on the scheduler's own thread unless {@link Builder#maintenanceInterval(java.time.Duration)} is zero; hosts
     * may also call it.
     */
    void maintain();

    /** @return true if the device was quarantined and is now back in the pool */
    boolean clearQuarantine(int deviceIndex);

    /**
     * Takes a GPU out of service (an admin's drain, recorded in the node ledger so that every process of the node sees
     * it): it takes no new allocation until {@link #undrain}; an allocation holding it keeps it until released, and it
     * stays out of service after that release. Its pool becomes {@link DeviceState.Pool#CORDONED}.
     *
     * @param deviceIndex the GPU's index
     * @param reason      why, shown in status (who drained it and why)
     * @return true if it was in service and is now drained; false if it was drained already
     * @throws GpuAllocationException with {@code UNKNOWN_DEVICE} for an index the node does not have
     * @throws UnsupportedOperationException from an implementation that cannot (the default)
     */
    default boolean drain(int deviceIndex, String reason) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot drain GPUs");
    }

    /**
     * Puts a drained GPU back in service.
     *
     * @param deviceIndex the GPU's index
     * @return true if it was drained and is now back in the pool; false if it was not drained
     * @throws GpuAllocationException with {@code UNKNOWN_DEVICE} for an index the node does not have
     * @throws UnsupportedOperationException from an implementation that cannot (the default)
     */
    default boolean undrain(int deviceIndex) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot undrain GPUs");
    }

    /**
     * @return problems found when the node ledger was loaded (devices this inventory does not have, an incomplete
     *         last record that was cut off)
     */
    List<String> recoveryProblems();

    /**
     * Catches up with the node ledger now: changes other processes made become visible, and listeners receive their
     * events ({@code ALLOCATED}, {@code RELEASED}, {@code RECLAIMED}, ...). Allocations of holder processes that are
     * gone are reclaimed. Readers ({@link #allocations()}, {@link #status()}, {@link #devices()}) and every change do
     * this on their own; a host calls it to hear about other processes' changes sooner. Without a state directory it
     * only reclaims.
     *
     * @throws LedgerException if the ledger cannot be read
     */
    void refresh();

    /** @return the state directory of the node ledger, or empty for a purely in-memory scheduler */
    Optional<Path> stateDir();

    /**
     * Like {@link #allocate}, but returns empty when the refusal is {@linkplain
     * GpuAllocationException.Reason#isTransient()
     * transient} (devices busy or unhealthy now). Permanent refusals still throw.
     */
    Optional<Allocation> tryAllocate(GpuRequest request);

    /**
     * Releases an allocation.
     *
     * @return true if it was live and is now released; false if it was already released
     * @throws GpuAllocationException with {@code UNKNOWN_ALLOCATION} for an id the node never issued; with
     *                                {@code JOB_RUNNING} when the allocation's job cgroup ({@link #recordJobCgroup})
     *                                still has processes, or its job process ({@link #recordJobProcess}) still lives
     *                                (nothing released: end the job first)
     * @throws LedgerException if the node ledger cannot record the release (it did not happen)
     */
    boolean release(String allocationId);

    /**
     * Records the cgroup of the job that uses a live allocation, once the host has made it (named
     * {@code job-<allocation id>}, see {@link io.gpusched.core.host.JobCgroups}) and before it starts the job: from
     * then on, when the allocation must end without its host (the holder process is gone, or its lease ends it), the
     * process that reclaims it first ends the cgroup's processes and removes the cgroup, or keeps the allocation held
     * when it cannot; and {@link #release} refuses while the cgroup has processes.
     *
     * @param allocationId a live allocation
     * @param cgroup       its job's cgroup directory: absolute, normalized, named {@code job-<allocationId>}, on a
     *                     cgroup file system
     * @return the allocation with its job cgroup
     * @throws GpuAllocationException {@code UNKNOWN_ALLOCATION} when it is not live
     * @throws IllegalArgumentException when the cgroup is not such a directory, or the allocation has another one
     * @throws UnsupportedOperationException from an implementation that cannot (the default)
     */
    default Allocation recordJobCgroup(String allocationId, Path cgroup) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot record a job cgroup");
    }

    /**
     * Records the process of a job that uses a live allocation without a cgroup of its own (a run without isolation),
     * once the host has started it: from then on {@link #release} refuses ({@code JOB_RUNNING}) while that process
     * lives (its pid with the same start time: a pid the kernel reused is not it). A reclaim (the holder is gone) is
     * not held back by it.
     *
     * @param allocationId a live allocation
     * @param process      the job's process
     * @return the allocation with its job process
     * @throws GpuAllocationException {@code UNKNOWN_ALLOCATION} when it is not live
     * @throws IllegalArgumentException when the allocation already has another job process
     * @throws UnsupportedOperationException from an implementation that cannot (the default)
     */
    default Allocation recordJobProcess(String allocationId, HolderProcess process) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot record a job process");
    }

    /**
     * @param allocationId an id
     * @return whether this node issued it as an allocation (live or ended): {@code <node prefix>-<sequence>} of an
     *         allocation record
     */
    default boolean issued(String allocationId) {
        return allocation(allocationId).isPresent();
    }

    /** @return live allocations of the whole node (every process, with a state directory), oldest first */
    List<Allocation> allocations();

    /** @return the live allocation with this id */
    Optional<Allocation> allocation(String allocationId);

    /** @return per-device state as strategies see it, in index order */
    List<DeviceState> devices();

    /** @return a snapshot of devices, holders and latest metrics */
    SchedulerStatus status();

    /**
     * @return what this process has appended to the node ledger and how long forcing it to disk took (group commits,
     *         records, cumulative and worst force time); empty when the scheduler keeps its state in memory only
     */
    default Optional<LedgerStatistics> ledgerStatistics() {
        return Optional.empty();
    }

    /** @return {@link #status()} as pretty-printed JSON */
    String statusJson();

    /** Gives the scheduler the latest metrics (a host that runs its own poller calls this). */
    void updateMetrics(GpuSample sample);

    /** @return the inventory this scheduler serves */
    GpuInventory inventory();

    /**
     * Adds an audit listener at run time, after the listeners given to {@link Builder#listener}; it receives the
     * events of changes made after this call returns. For a component built after the scheduler (a console, an
     * exporter), instead of a forwarding reference set later.
     *
     * @param listener the listener; adding one already added adds it again (it is then called twice)
     * @throws NullPointerException when {@code listener} is null
     */
    void addListener(AllocationListener listener);

    /**
     * Removes a listener added by {@link #addListener} (one registration of it); listeners given to the builder stay.
     *
     * @return whether it was registered
     */
    boolean removeListener(AllocationListener listener);

    /** @return the strategy in use */
    AllocationStrategy strategy();

    /**
     * Releases allocations in one transaction: with a node ledger, one append forced to disk, or nothing.
     *
     * @param allocationIds allocations to release; an id released before is skipped
     * @return how many were live and are now released
     * @throws GpuAllocationException with {@code UNKNOWN_ALLOCATION} for an id the node never issued (nothing released)
     * @throws LedgerException if the node ledger cannot record the releases (none happened)
     * @throws UnsupportedOperationException from an implementation that cannot (the default)
     */
    default int releaseAll(Collection<String> allocationIds) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot release several allocations in one"
                + " transaction; call release(id) for each");
    }

    /**
     * Allocates requests in the given order as one transaction: each is decided on the state the ones before it leave,
     * as {@link #allocate(GpuRequest)} decides it, and it stops at the first refusal (that request and those after it
     * are not allocated, even where a later one would fit: nothing jumps ahead). With a node ledger the grants are one
     * append, forced to disk once. For a host that serves a queue in order (the node service's fair queue): it pays
     * one forced write for all the requests that fit, not one each.
     *
     * @param requests what to allocate, in order; may be empty
     * @return the allocations of the granted requests, in order: a prefix of {@code requests}, at least the first
     *         when {@code requests} is not empty (a refusal after the first is not reported: ask for that one again)
     * @throws GpuAllocationException the first request's refusal (nothing was allocated)
     * @throws LedgerException if the node ledger cannot record the grants (none happened)
     * @throws NullPointerException when {@code requests} or one of them is null
     */
    default List<Allocation> allocateInOrder(List<GpuRequest> requests) {
        List<GpuRequest> todo = List.copyOf(requests);
        List<Allocation> out = new ArrayList<>(todo.size());
        for (GpuRequest r : todo) { // the default: one transaction each (gpusched's own scheduler makes them one)
            try {
                out.add(allocate(r));
            } catch (RuntimeException e) { // after a grant, report the grants: the caller asks again for the rest
                if (out.isEmpty()) {
                    throw e;
                }
                break;
            }
        }
        return out;
    }

    /**
     * Releases allocations, each on its own, then allocates requests in order on the state the releases leave, all as
     * one transaction: with a node ledger one append, forced to disk once. For a host that hands the GPUs freed by its
     * callers' releases straight to the queue it serves (the node service's fair queue): a release and the grant it
     * makes possible cost one forced write, not two.
     *
     * <p>Unlike {@link #releaseAll} and {@link #allocateInOrder}, nothing here refuses the whole: a release that cannot
     * be made (an id the node never issued, a job still running in the allocation) is reported in its own outcome and
     * the others go ahead; the requests are granted in order up to the first refusal (nothing after it is tried, even
     * one that would fit), which is reported, not thrown, and the releases are made whatever the requests get.
     *
     * @param releaseIds allocations to release, in order; an id released before (or earlier in the list) is reported
     *                   as not released; may be empty
     * @param requests   what to allocate, in order; may be empty
     * @return each release's outcome and the grants
     * @throws LedgerException if the node ledger cannot record the change (none of it happened; the default, which
     *                         makes one transaction of each, may have made those before it)
     * @throws NullPointerException when a list or an element is null
     */
    default ReleasesAndGrants releaseEachThenAllocateInOrder(List<String> releaseIds, List<GpuRequest> requests) {
        List<String> ids = List.copyOf(releaseIds);
        List<GpuRequest> todo = List.copyOf(requests);
        List<ReleasesAndGrants.Release> released = new ArrayList<>(ids.size());
        for (String id : ids) { // the default: one transaction each (gpusched's own scheduler makes them one)
            try {
                released.add(new ReleasesAndGrants.Release(id, release(id), Optional.empty()));
            } catch (LedgerException e) {
                throw e;
            } catch (RuntimeException e) {
                released.add(new ReleasesAndGrants.Release(id, false, Optional.of(e)));
            }
        }
        List<Allocation> grants = new ArrayList<>(todo.size());
        Optional<RuntimeException> refusal = Optional.empty();
        for (GpuRequest r : todo) {
            try {
                grants.add(allocate(r));
            } catch (LedgerException e) {
                throw e;
            } catch (RuntimeException e) {
                refusal = Optional.of(e);
                break;
            }
        }
        return new ReleasesAndGrants(released, grants, refusal);
    }

    /**
     * @param request a request with its owner
     * @return the most GPUs its owner may hold at once ({@code gpu.users}: per user, per group, or for all), empty when
     *         no limit applies (no owner, no limit configured, or a scheduler that does not say)
     */
    default OptionalInt quotaFor(GpuRequest request) {
        return OptionalInt.empty();
    }

    /**
     * @param request a request with its owner
     * @return its owner's limit with where it comes from ({@code gpu.users.per_user.alice}, ...), as {@link #quotaFor}
     *         (a scheduler that does not say where gives {@code gpu.users})
     */
    default Optional<UserQuotas.Limit> quotaLimitFor(GpuRequest request) {
        OptionalInt q = quotaFor(request);
        return q.isPresent() ? Optional.of(new UserQuotas.Limit(q.getAsInt(), "gpu.users")) : Optional.empty();
    }

    /**
     * @return the most shared allocations one GPU takes at once ({@code gpu.max_shared_per_gpu}); 0 where there is no
     *         bound or the scheduler does not say
     */
    default int maxSharedPerGpu() {
        return 0;
    }

    /**
     * As {@link #releaseEachThenAllocateInOrder(List, List)}, with the GPUs of {@code withheld} kept from every request
     * of this call, as if they were draining: what a fair queue owes to a waiting request ahead of these (they may take
     * any other free GPU, never one that request could use). Nothing is recorded about the withheld GPUs.
     *
     * @param withheld indices of GPUs no request of this call may take; empty: none
     * @throws UnsupportedOperationException where this scheduler cannot withhold GPUs and {@code withheld} is not empty
     *                                       (the default: gpusched's own scheduler can)
     */
    default ReleasesAndGrants releaseEachThenAllocateInOrder(List<String> releaseIds, List<GpuRequest> requests,
            Set<Integer> withheld) {
        if (withheld.isEmpty()) {
            return releaseEachThenAllocateInOrder(releaseIds, requests);
        }
        throw new UnsupportedOperationException(getClass().getName() + " cannot withhold GPUs from a request");
    }

    /**
     * Releases allocations and allocates in one transaction: with a node ledger the releases and the new allocation
     * are one append, forced to disk once, so no process (and no restart after a crash) ever sees some of them
     * without the others. The allocation is decided on the state after the releases, so it may take their devices
     * (a pinned request for a finished job's GPUs, say). For hosts that learn of finished jobs only when they ask
     * for the next one (YARN's device plug-in).
     *
     * @param releaseIds allocations to release first; an id released before is skipped (as {@link #release}
     *                   answers false for it); may be empty
     * @param request    what to allocate
     * @return the new allocation
     * @throws GpuAllocationException with {@code UNKNOWN_ALLOCATION} for an id the node never issued, or the
     *                                request's refusal: in either case nothing was released and nothing allocated
     * @throws LedgerException if the node ledger cannot record the change (none of it happened)
     * @throws UnsupportedOperationException from an implementation that cannot do both in one transaction (the
     *                                       default; gpusched's own scheduler can)
     */
    default Allocation releaseAndAllocate(Collection<String> releaseIds, GpuRequest request) {
        throw new UnsupportedOperationException(getClass().getName() + " cannot release and allocate in one"
                + " transaction; call release(id) for each, then allocate(request)");
    }

    /**
     * Stops the metrics poller and detaches from the inventory's health events; does not close the inventory. Threads
     * waiting in {@link #allocate(GpuRequest, java.time.Duration)} wake and fail with a {@link GpuException} (nothing
     * is allocated), and so does any later waiting allocate.
     */
    @Override
    void close();

    /** @return a new builder */
    static Builder builder() {
        return new Builder();
    }

    /** Builds a {@link GpuScheduler}. Setters check their argument at once; {@link #build()} needs an inventory. */
    final class Builder {
        GpuInventory inventory;
        AllocationStrategy strategy;
        GpuConfig config;
        Clock clock;
        boolean auditLogging = true;
        Duration pollInterval;
        Duration maintenanceInterval = Duration.ofSeconds(1);
        Path stateDir;
        boolean strictRecovery;
        GroupResolver groups;
        final List<AllocationListener> listeners = new ArrayList<>();

        private Builder() {
        }

        private static void unset(Object current, String what) {
            if (current != null) {
                throw new IllegalStateException(what + " was already set");
            }
        }

        /** @param v the inventory to serve (required) @return this */
        public Builder inventory(GpuInventory v) {
            unset(inventory, "inventory");
            inventory = Objects.requireNonNull(v, "inventory");
            return this;
        }

        /** @param v the strategy; default: the configuration's {@code gpu.strategy} @return this */
        public Builder strategy(AllocationStrategy v) {
            unset(strategy, "strategy");
            strategy = Objects.requireNonNull(v, "strategy");
            return this;
        }

        /** @param v configuration; default {@link GpuConfig#defaults()} @return this */
        public Builder config(GpuConfig v) {
            unset(config, "config");
            config = Objects.requireNonNull(v, "config");
            return this;
        }

        /** @param v clock for timestamps and leases; default the system UTC clock @return this */
        public Builder clock(Clock v) {
            unset(clock, "clock");
            clock = Objects.requireNonNull(v, "clock");
            return this;
        }

        /** @param v an audit listener; may be called several times @return this */
        public Builder listener(AllocationListener v) {
            listeners.add(Objects.requireNonNull(v, "listener"));
            return this;
        }

        /** @param v whether to add the default slf4j audit listener (default true) @return this */
        public Builder auditLogging(boolean v) {
            auditLogging = v;
            return this;
        }

        /**
         * @param v read {@link GpuInventory#sample()} this often on a daemon thread; default: never (the host calls
         *          {@link GpuScheduler#updateMetrics}) @return this
         */
        public Builder metricsPollInterval(Duration v) {
            unset(pollInterval, "metrics poll interval");
            if (v.isNegative() || v.isZero()) {
                throw new IllegalArgumentException("metrics poll interval must be positive, was " + v);
            }
            pollInterval = v;
            return this;
        }

        /**
         * @param v how often {@link GpuScheduler#maintain()} runs on a daemon thread (default 1 s); zero: never, the
         * host
         *          calls it @return this
         */
        public Builder maintenanceInterval(Duration v) {
            if (v.isNegative()) {
                throw new IllegalArgumentException("maintenance interval must be >= 0, was " + v);
            }
            maintenanceInterval = v;
            return this;
        }

        /**
         * Keeps the node's allocations in the node ledger of this directory, shared by every process of the node (the
         * command, servers, executors): each change is forced to disk before it returns and survives crashes;
         * allocations of other processes are honoured. Default: {@code gpu.state_dir} of the configuration, else
         * none (purely in memory). The directory is created if absent; one writable by group or others is refused.
         * Every process sharing it must see the same {@code /proc} (one PID namespace) for holder binding to work.
         * The ledger records which node it describes; an inventory of another node (simulated vs real, or no GPU in
         * common) is refused at {@link #build()} with {@link LedgerException.Kind#NODE_MISMATCH}. Hosts that want the
         * node's default directory use {@link io.gpusched.core.host.GpuNode} (or
         * {@link io.gpusched.core.host.StateDirectory#forNode}), the rule the command and every engine use.
         *
         * @param v the state directory @return this
         */
        public Builder stateDir(Path v) {
            unset(stateDir, "state directory");
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /**
         * @param v a journal file of earlier versions; its directory becomes the {@linkplain #stateDir state
         *          directory} (the old journal's content is not read) @return this
         * @deprecated use {@link #stateDir(java.nio.file.Path)}
         */
        @Deprecated
        public Builder journal(Path v) {
            Objects.requireNonNull(v, "journal");
            Path parent = v.toAbsolutePath().getParent();
            return stateDir(parent);
        }

        /**
         * @param v the groups of a request's owner, for per-group quotas ({@code gpu.users.per_group}); asked outside
         *          the ledger's lock. Default: {@link GroupResolver#none()} (per-group limits then never apply)
         * @return this
         */
        public Builder groups(GroupResolver v) {
            unset(groups, "group resolver");
            groups = Objects.requireNonNull(v, "groups");
            return this;
        }

        /** @param v refuse to start when a ledger allocation holds a device the inventory does not have @return this */
        public Builder strictRecovery(boolean v) {
            strictRecovery = v;
            return this;
        }

        /** @return the scheduler @throws IllegalStateException if no inventory was set */
        public GpuScheduler build() {
            if (inventory == null) {
                throw new IllegalStateException("a GpuScheduler needs an inventory: builder().inventory(...)");
            }
            return new DefaultGpuScheduler(this);
        }
    }
}
