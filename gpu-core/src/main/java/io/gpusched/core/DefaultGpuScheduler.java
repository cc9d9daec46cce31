package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.LedgerRecord.Allocated;
import io.gpusched.core.LedgerRecord.Cause;
import io.gpusched.core.LedgerRecord.PoolChanged;
import io.gpusched.core.LedgerRecord.Released;
import io.gpusched.core.LedgerRecord.Renewed;
import io.gpusched.core.host.JobCgroupException;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.core.internal.Json;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The scheduler orchestrates small parts: every change is a {@link Ledger} transaction (in memory, or on the node
 * ledger shared by the node's processes) decided by {@link Placement}, limited by {@link RateLimits}; waiting
 * allocations queue in a {@link WaitQueue}; {@link Leases} and {@link DrainControl} run in {@link #maintain()};
 * {@link HealthTracker} follows the inventory. Events go to listeners outside every lock.
 *
 * <p>Why it is over 500 lines: it is the one place where the parts meet (each public operation is a short
 * sequence of part calls under the ledger's transaction); the parts themselves live in their own types.
 */
final class DefaultGpuScheduler implements GpuScheduler {
    private static final Logger LOG = LoggerFactory.getLogger(DefaultGpuScheduler.class);

    private final GpuInventory inventory;
    private final AllocationStrategy strategy;
    private final GpuConfig config;
    private final Clock clock;
    private final List<AllocationListener> listeners;
    /** listeners added at run time ({@link #addListener}), called after {@link #listeners} */
    private final List<AllocationListener> added = new CopyOnWriteArrayList<>();
    private final List<ScheduledExecutorService> threads = new ArrayList<>();
    private final HealthTracker health;
    private final DrainControl drain;
    private final Placement placement;
    private final RateLimits rateLimits;
    private final Leases leases = new Leases();
    /** Ends the job cgroups of allocations that must end, or keeps them held and says so. */
    private final JobCgroupReclaim jobs = new JobCgroupReclaim(this::ledgerWrittenByUsAlone);
    private final WaitQueue waiters;
    /** The node-wide queue of waiters; null without a node ledger (or without a usable /proc). */
    private final WaitTickets tickets;
    private final Ledger ledger;
    private final String idPrefix;
    private final List<String> recoveryProblems;
    private final GroupResolver groups;

    DefaultGpuScheduler(GpuScheduler.Builder b) {
        this.inventory = b.inventory;
        this.config = b.config != null ? b.config : GpuConfig.defaults();
        this.strategy = b.strategy != null ? b.strategy : AllocationStrategies.fromConfig(config);
        this.clock = b.clock != null ? b.clock : Clock.systemUTC();
        List<AllocationListener> ls = new ArrayList<>(b.listeners);
        if (b.auditLogging) {
            ls.add(0, AllocationListener.slf4j());
        }
        this.listeners = List.copyOf(ls);
        this.groups = b.groups != null ? b.groups : GroupResolver.none();
        List<GpuDevice> devices = inventory.devices();
        Map<Integer, GpuDevice> byIndex = new HashMap<>();
        Map<String, GpuDevice> byUuid = new HashMap<>();
        for (GpuDevice d : devices) {
            // identifiers reach shell variables, container flags and terminals: a backend may report hostile ones too
            DeviceIdentifiers.problem(d).ifPresent(p -> {
                throw new IllegalArgumentException("inventory " + inventory.backend() + ": " + p);
            });
            if (byIndex.put(d.index(), d) != null || byUuid.put(d.uuid(), d) != null) {
                throw new IllegalArgumentException("inventory " + inventory.backend() + " lists device "
                        + d.index() + " (" + d.uuid() + ") twice");
            }
        }
        this.health = new HealthTracker(inventory);
        this.drain = new DrainControl(inventory, config.drainTimeout());
        this.placement = new Placement(strategy, inventory.topology(), config.maxSharedPerGpu());
        this.rateLimits = new RateLimits(config);
        Path stateDir = b.stateDir != null ? b.stateDir : config.stateDir().orElse(null);
        LedgerFile file = null;
        Ledger l;
        try {
            file = stateDir == null ? null : new LedgerFile(stateDir, LedgerCompaction.threshold(),
                    StateGroup.of(config.stateGroup()));
            if (file != null) {
                NodeIdentity.check(file, inventory);
            }
            this.tickets = file == null ? null : WaitTickets.of(file.directory(), file.group()).orElse(null);
            LedgerFile f = file;
            WaitTickets t = tickets;
            this.waiters = new WaitQueue(f == null ? null : t == null ? f::stamp : () -> List.of(f.stamp(), t.stamp()),
                    this::holderGone);
            l = new Ledger(new NodeState(health.initialStates(devices)), file, this::housekeeping, this::fire,
                    waiters::signal);
        } catch (RuntimeException e) {
            health.close();
            if (file != null) {
                file.close();
            }
            throw e;
        }
        this.ledger = l;
        List<String> problems = new ArrayList<>(ledger.readLocal(s -> List.copyOf(s.problems)));
        if (file != null) {
            problems.addAll(file.warnings());
        }
        if (b.strictRecovery && !ledger.readLocal(s -> s.problems).isEmpty()) {
            ledger.close();
            health.close();
            throw new GpuException("refusing to start (strict recovery): " + String.join("; ", problems));
        }
        this.recoveryProblems = List.copyOf(problems);
        for (String p : problems) {
            LOG.warn("node ledger recovery: {}", p);
        }
        if (file != null) {
            this.idPrefix = file.prefix();
        } else {
            byte[] rnd = new byte[3];
            new SecureRandom().nextBytes(rnd);
            this.idPrefix = String.format(Locale.ROOT, "a%02x%02x%02x", rnd[0], rnd[1], rnd[2]);
        }
        health.attach(ledger, this::fire, clock);
        if (b.pollInterval != null) {
            schedule("gpusched-metrics-poller", b.pollInterval, this::pollOnce);
        }
        if (!b.maintenanceInterval.isZero()) {
            schedule("gpusched-maintenance", b.maintenanceInterval, this::maintainQuietly);
        }
    }

    private void schedule(String name, Duration every, Runnable task) {
        ScheduledExecutorService ex = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        });
        long ms = Math.max(1, every.toMillis());
        ex.scheduleWithFixedDelay(task, ms, ms, TimeUnit.MILLISECONDS);
        threads.add(ex);
    }

    private void pollOnce() {
        try {
            updateMetrics(inventory.sample());
        } catch (RuntimeException e) {
            LOG.warn("sampling {} failed: {}", inventory.backend(), e.toString());
        }
    }

    private void maintainQuietly() {
        try {
            maintain();
        } catch (RuntimeException e) {
            LOG.warn("scheduler maintenance failed: {}", e.toString());
        }
    }

    // ---------------------------------------------------------------- allocate

    @Override
    public Allocation allocate(GpuRequest request) {
        Objects.requireNonNull(request, "request");
        try {
            return commitAllocation(request, null, quotaOf(request));
        } catch (GpuAllocationException e) {
            rejected(request, e);
            throw e;
        }
    }

    /** Snapshots a request is placed on outside the lock before it is placed under the lock (see commitAllocation). */
    static final int PLACEMENT_ATTEMPTS = 3;

    /** A pick made on a snapshot that a later change invalidated: decide again (never leaves this class). */
    private static final class StaleSnapshot extends RuntimeException {
        private static final long serialVersionUID = 1L;

        StaleSnapshot() {
            super("the placement's snapshot is out of date", null, false, false);
        }
    }

    private static final StaleSnapshot STALE = new StaleSnapshot();

    /**
     * Decides outside the lock, commits under it: the strategy runs on the latest published snapshot with no lock held
     * (another allocate, release or renew of this process, or of any process of the node, goes on meanwhile); the
     * commit re-validates the pick against the caught-up state under the lock and appends it, or, when a change in
     * between took one of its devices, tries again on a fresh snapshot; after {@link #PLACEMENT_ATTEMPTS} such tries it
     * decides under the lock as before (still bounded by the strategy's budget). A refusal is always decided under the
     * lock, on the latest state.
     */
    private Allocation commitAllocation(GpuRequest request, Waiter waiter, UserQuotas.Limit quota) {
        for (int attempt = 1;; attempt++) {
            Placement.Pick pick = attempt <= PLACEMENT_ATTEMPTS ? pickOutsideLock(request) : null;
            try {
                return ledger.commit(allocation(request, waiter, pick, quota));
            } catch (StaleSnapshot e) {
                staleSnapshots.incrementAndGet();
                if (attempt == 1 && ledger.durable()) {
                    ledger.refresh(); // another process moved the ledger: the next snapshot starts from its state
                }
            }
        }
    }

    /** @return the strategy's pick on the latest published snapshot, or null to decide under the lock */
    private Placement.Pick pickOutsideLock(GpuRequest request) {
        if (!config.enabled() || (config.maxGpusPerRequest() > 0 && request.count() > config.maxGpusPerRequest())) {
            return null; // refused under the lock, without a search
        }
        try {
            return placement.pick(request, ledger.devices(), clock.instant());
        } catch (GpuAllocationException e) {
            return null; // a refusal on a snapshot may be out of date: decided again on the latest state
        }
    }

    /** Picks that a concurrent change invalidated between the snapshot and the commit (tests, status). */
    private final AtomicLong staleSnapshots = new AtomicLong();

    /** @return how many picks a concurrent change invalidated (each was decided again) */
    long staleSnapshots() {
        return staleSnapshots.get();
    }

    /** A waiting allocation's place in the node-wide queue (guarded by the ledger's lock). */
    private static final class Waiter {
        final long deadlineMillis;
        WaitTickets.Ticket ticket;

        Waiter(long deadlineMillis) {
            this.deadlineMillis = deadlineMillis;
        }
    }

    @Override
    public Allocation allocate(GpuRequest request, Duration maxWait) throws InterruptedException {
        Objects.requireNonNull(request, "request");
        Objects.requireNonNull(maxWait, "maxWait");
        long start = System.nanoTime();
        long deadline = start + Math.max(0, maxWait.toNanos());
        GpuAllocationException last = null;
        long ticket = waiters.enter();
        long waitMillis = Math.max(0, maxWait.toMillis());
        long now = System.currentTimeMillis();
        Waiter waiter = new Waiter(waitMillis > Long.MAX_VALUE - now ? Long.MAX_VALUE : now + waitMillis);
        UserQuotas.Limit quota = quotaOf(request);
        try {
            if (!waiters.awaitTurn(ticket, deadline)) {
                last = new GpuAllocationException(Reason.INSUFFICIENT_GPUS, request.describe() + " requested; still"
                        + " waiting behind earlier requests of this process");
            } else {
                while (true) {
                    WaitQueue.Mark mark = waiters.mark();
                    try {
                        return commitAllocation(request, waiter, quota);
                    } catch (GpuAllocationException e) {
                        last = e;
                        if (!e.reason().isTransient()) {
                            break;
                        }
                    }
                    if (!waiters.awaitChange(mark, deadline)) {
                        break;
                    }
                }
            }
        } finally {
            try {
                if (tickets != null) {
                    ledger.readLocal(s -> {
                        tickets.remove(waiter.ticket);
                        waiter.ticket = null;
                        return null;
                    });
                }
            } catch (RuntimeException e) {
                LOG.debug("removing the wait ticket failed (the scheduler may be closing): {}", e.toString());
            } finally {
                waiters.leave(ticket);
            }
        }
        if (last.reason().isTransient()) {
            Duration waited = Duration.ofNanos(System.nanoTime() - start);
            last = new GpuAllocationException(last.reason(), last.getMessage() + "; gave up after waiting "
                    + human(waited), last.obstacles());
        }
        rejected(request, last);
        throw last;
    }

    private static String human(Duration d) {
        return String.format(Locale.ROOT, "%.3f s", d.toNanos() / 1e9);
    }

    @Override
    public Optional<Allocation> tryAllocate(GpuRequest request) {
        try {
            return Optional.of(allocate(request));
        } catch (GpuAllocationException e) {
            if (e.reason().isTransient()) {
                return Optional.empty();
            }
            throw e;
        }
    }

    private void rejected(GpuRequest request, GpuAllocationException e) {
        fire(List.of(new AllocationEvent(AllocationEvent.Type.REJECTED, clock.instant(), Optional.empty(),
                request.owner(), request.jobId(), List.of(), Optional.of(e.reason()), e.getMessage())));
    }

    /**
     * The allocate change: configuration rules, rate limit, placement on the up-to-date state, then the node's
     * waiting queue: with live tickets, only the oldest ticket's waiter may allocate. A waiter refused for a
     * transient reason registers a ticket (under the node's lock); a granted waiter's ticket goes in the same lock.
     *
     * @param waiter the waiting caller, or null for allocate/tryAllocate
     */
    private Ledger.Change<Allocation> allocation(GpuRequest request, Waiter waiter, Placement.Pick pick,
            UserQuotas.Limit quota) {
        Ledger.Change<Allocation> decide = decideAllocation(request, waiter, pick, quota);
        if (tickets == null || waiter == null) {
            return decide;
        }
        return (state, seq) -> {
            try {
                Ledger.Decision<Allocation> d = decide.decide(state, seq);
                tickets.remove(waiter.ticket);
                waiter.ticket = null;
                return d;
            } catch (GpuAllocationException e) {
                if (e.reason() == Reason.RATE_LIMITED || e.reason() == Reason.QUOTA_EXCEEDED) {
                    // tokens refill with time, not with a change on the node, and a quota frees only when this owner
                    // releases: never hold the node's queue for either
                    tickets.remove(waiter.ticket);
                    waiter.ticket = null;
                } else if (e.reason().isTransient() && waiter.ticket == null
                        && waiter.deadlineMillis > System.currentTimeMillis()) { // a zero wait never queues
                    try {
                        waiter.ticket = tickets.register(waiter.deadlineMillis);
                    } catch (RuntimeException r) {
                        LOG.warn("waiting without a place in the node's queue: {}", r.getMessage());
                    }
                }
                throw e;
            }
        };
    }

    /** Caller holds the node's lock: refuses unless no waiter of the node is ahead of this caller. */
    private void awaitTurnOnNode(GpuRequest request, Waiter waiter) {
        List<WaitTickets.Ticket> live = tickets.live();
        if (live.isEmpty()) {
            return;
        }
        WaitTickets.Ticket first = live.get(0);
        if (waiter != null && waiter.ticket != null) {
            if (first.name().equals(waiter.ticket.name())) {
                return;
            }
            if (!live.contains(waiter.ticket)) {
                waiter.ticket = null; // removed as stale by another process: it registers again, at the end
            }
        }
        throw new GpuAllocationException(Reason.INSUFFICIENT_GPUS, request.describe() + " requested; "
                + live.size() + " waiting request(s) on this node came first (the oldest: ticket " + first.number()
                + " of " + first.holder() + "); waiting requests are served first come, first served across the"
                + " node's processes, and nothing else is allocated meanwhile");
    }

    /**
     * @param pick the strategy's choice on a snapshot, made outside the lock, or null to decide here
     * @throws StaleSnapshot when the pick is no longer valid on the latest state
     */
    private Ledger.Change<Allocation> decideAllocation(GpuRequest request, Waiter waiter, Placement.Pick pick,
            UserQuotas.Limit quota) {
        return (state, seq) -> {
            if (!config.enabled()) {
                throw new GpuAllocationException(Reason.DISABLED,
                        "GPU allocation is disabled by configuration (gpu.enabled: false)");
            }
            if (config.maxGpusPerRequest() > 0 && request.count() > config.maxGpusPerRequest()) {
                throw new GpuAllocationException(Reason.INVALID_REQUEST, request.count()
                        + " GPUs requested; this scheduler allows at most " + config.maxGpusPerRequest()
                        + " per request (gpu.max_gpus_per_request)");
            }
            if (request.sharing() == SharingMode.SHARED && !config.allowSharing()) {
                throw new GpuAllocationException(Reason.INVALID_REQUEST, "shared GPUs requested, but sharing is"
                        + " disabled (gpu.allow_sharing: false); ask for exclusive GPUs");
            }
            if (quota != null) {
                checkQuota(request, quota, state);
            }
            Instant now = clock.instant();
            rateLimits.check(request, now);
            List<DeviceState> latest = state.snapshot();
            List<GpuDevice> chosen;
            PlacementQuality quality;
            if (pick != null) {
                chosen = placement.revalidate(request, latest, pick); // refuses on the latest state if it must
                if (chosen == null) {
                    throw STALE;
                }
                quality = pick.quality();
            } else {
                Placement.Pick here = placement.pick(request, latest, now);
                chosen = here.devices();
                quality = here.quality();
            }
            if (tickets != null) {
                awaitTurnOnNode(request, waiter);
            }
            String id = idPrefix + "-" + seq;
            if (request.jobCgroup().isPresent()
                    && !JobCgroups.allocationId(Path.of(request.jobCgroup().get())).equals(Optional.of(id))) {
                throw new GpuAllocationException(Reason.INVALID_REQUEST, "the request names job cgroup "
                        + request.jobCgroup().get() + ", but a job cgroup is named " + JobCgroups.PREFIX
                        + "<allocation id> (this allocation would be " + id + "); allocate without it, make "
                        + JobCgroups.PREFIX + "<id> and record it with recordJobCgroup(id, dir)");
            }
            Optional<Instant> expires = request.maxDuration().map(now::plus);
            Allocation a = new Allocation(id, chosen, request, now, expires, quality);
            Ledger.Decision<Allocation> d = Ledger.Decision.of(a, new Allocated(id, a.deviceUuids(), request, now,
                    expires, quality, config.releaseOnExpiry() && expires.isPresent()));
            if (rateLimits.spend(request, now)) {
                d = d.onAbort(() -> rateLimits.refund(request)); // not granted after all: the token goes back
            }
            return d;
        };
    }

    @Override
    public int maxSharedPerGpu() {
        return config.maxSharedPerGpu();
    }

    @Override
    public OptionalInt quotaFor(GpuRequest request) {
        UserQuotas.Limit l = quotaOf(request);
        return l == null ? OptionalInt.empty() : OptionalInt.of(l.gpus());
    }

    @Override
    public Optional<UserQuotas.Limit> quotaLimitFor(GpuRequest request) {
        return Optional.ofNullable(quotaOf(request));
    }

    /**
     * The owner's limit, decided outside the lock (the group lookup may take a while); null when the request has no
     * owner or no limit is configured.
     */
    private UserQuotas.Limit quotaOf(GpuRequest request) {
        UserQuotas q = config.users();
        if (request.owner().isEmpty() || !q.any()) {
            return null;
        }
        String user = request.owner().get();
        List<String> gs = List.of();
        if (!q.perGroup().isEmpty() && !q.perUser().containsKey(user)) {
            try {
                gs = List.copyOf(groups.groupsOf(user));
            } catch (RuntimeException e) {
                LOG.warn("the groups of {} could not be resolved (per-group limits do not apply to this request): {}",
                        user, e.toString());
            }
        }
        UserQuotas.Limit l = q.limitFor(user, gs);
        return l.limited() ? l : null;
    }

    /** Under the lock: refuses when the owner would hold more GPUs than {@code quota} allows. */
    private static void checkQuota(GpuRequest request, UserQuotas.Limit quota, NodeState state) {
        String user = request.owner().get();
        if (request.count() > quota.gpus()) {
            throw new GpuAllocationException(Reason.INVALID_REQUEST, request.describe() + " requested by " + user
                    + "; " + user + " may hold at most " + quota.gpus() + " GPU(s) at once (" + quota.source()
                    + "), so this request can never be served: ask for " + quota.gpus() + " or fewer");
        }
        int held = 0;
        List<String> ids = new ArrayList<>();
        for (Allocation a : state.live.values()) {
            if (request.sameOwnerAs(a.request())) {
                held += a.devices().size();
                if (ids.size() < 5) {
                    ids.add(a.id() + " (" + a.devices().size() + ")");
                } else if (ids.size() == 5) {
                    ids.add("...");
                }
            }
        }
        if (held + request.count() > quota.gpus()) {
            throw new GpuAllocationException(Reason.QUOTA_EXCEEDED, request.describe() + " requested by " + user
                    + ", who holds " + held + " GPU(s) already" + (ids.isEmpty() ? "" : " in " + String.join(", ",
                            ids))
                    + "; the limit is " + quota.gpus() + " GPU(s) per user (" + quota.source()
                    + "): release one of them first, or wait for your own releases");
        }
    }

    /**
     * Run first in every transaction that may have allocations to end (under the node's lock, on the caught-up state):
     * releases the allocations whose holder process is gone ({@code RECLAIMED}) and those whose lease ended and ends
     * them ({@code EXPIRED}: the allocating process had {@code release_on_expiry}, or this one has), ending each one's
     * job cgroup first ({@link JobCgroupReclaim}; one that cannot be ended stays held). No maintenance thread is
     * needed: whichever process of the node changes or reads the ledger next does it.
     *
     * @return the records, and the events of attempts that kept an allocation held
     */
    private Ledger.Decision<List<AllocationEvent>> housekeeping(NodeState state, long seq) {
        List<LedgerRecord> out = new ArrayList<>();
        List<AllocationEvent> events = new ArrayList<>();
        Instant now = clock.instant();
        for (Allocation a : state.live.values()) {
            Optional<HolderProcess> h = a.request().holder();
            Cause cause = null;
            String why = null;
            if (h.isPresent() && h.get().isGoneFor(a.owner(), a.request().ownerUid())) {
                cause = Cause.RECLAIMED;
                why = "its holder " + h.get() + " is gone";
            } else if (Leases.ends(a, state, config.releaseOnExpiry(), now)) {
                cause = Cause.EXPIRED;
                why = "its lease ended at " + a.expiresAt().get();
            }
            if (cause != null && jobs.ended(a, why, now, events)) {
                out.add(new Released(a.id(), cause, now, drain.drainOf(a), cause == Cause.RECLAIMED ? h
                        : Optional.empty()));
            }
        }
        return new Ledger.Decision<>(out, events);
    }

    /**
     * @return whether a transaction would end a live allocation now: its holder process is gone, or its lease ended and
     *         ends it (one whose job could not be ended is asked again only when its retry is due)
     */
    private boolean holderGone() {
        Instant now = clock.instant();
        List<HolderProcess> holders = ledger.readLocal(s -> {
            if (!s.needsHousekeeping()) {
                return List.<HolderProcess>of();
            }
            List<HolderProcess> out = new ArrayList<>(s.bound);
            for (Allocation a : s.live.values()) {
                if (jobs.waiting(a.id())) {
                    continue;
                }
                if (Leases.ends(a, s, config.releaseOnExpiry(), now)) {
                    return null;
                }
                a.request().holder().ifPresent(out::add);
            }
            return out;
        });
        if (holders == null) {
            return true;
        }
        for (HolderProcess h : holders) { // /proc is read outside the lock
            if (!h.isAlive()) {
                return true;
            }
        }
        return false;
    }

    // ---------------------------------------------------------------- release, renew

    @Override
    public boolean release(String allocationId) {
        Objects.requireNonNull(allocationId, "allocationId");
        if (!drain.decided()) { // ask the allocation's own GPUs (outside the lock), not every lost GPU of the node
            Allocation held = ledger.readLocal(s -> s.live.get(allocationId));
            if (held != null) {
                drain.decideIfUndecided(held.devices());
            }
        }
        return ledger.commit((state, seq) -> {
            Allocation a = state.live.get(allocationId);
            if (a == null) {
                if (issued(allocationId, state)) {
                    return Ledger.Decision.of(false);
                }
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no allocation \"" + allocationId
                        + "\" was issued by this node (its ids look like " + idPrefix + "-N; " + state.live.size()
                        + " live)");
            }
            refuseWhileJobRuns(a);
            return Ledger.Decision.of(true, new Released(a.id(), Cause.RELEASED, clock.instant(), drain.drainOf(a),
                    Optional.empty()));
        });
    }

    /**
     * Refuses the release of an allocation whose job cgroup still has processes: they would keep using GPUs the next
     * caller gets. Its host (the holder) ends the job and releases; a reclaim ends it when the host is gone.
     */
    private static void refuseWhileJobRuns(Allocation a) {
        Optional<HolderProcess> process = a.request().jobProcess();
        if (process.isPresent() && process.get().isAlive()) {
            throw new GpuAllocationException(Reason.JOB_RUNNING, "allocation " + a.id() + " is in use: its job"
                    + a.request().jobId().map(j -> " " + j).orElse("") + " runs as pid " + process.get().pid()
                    + " (without a cgroup)"
                    + a.request().holder().map(h -> ", started by " + h).orElse("") + "; nothing was released."
                    + " End the job (Ctrl-C its gpusched run, or kill pid " + a.request().holder().map(h -> h.pid())
                            .orElse(process.get().pid())
                    + "; its owner or root may) and its GPUs are released with it");
        }
        if (a.request().jobCgroup().isEmpty()) {
            return;
        }
        Path dir = Path.of(a.request().jobCgroup().get());
        List<Long> pids = JobCgroups.pids(dir);
        if (!pids.isEmpty()) {
            throw new GpuAllocationException(Reason.JOB_RUNNING, "allocation " + a.id() + " is in use: its job"
                    + a.request().jobId().map(j -> " " + j).orElse("") + " runs in " + dir + " (pids "
                    + pids.subList(0, Math.min(5, pids.size())).toString().replaceAll("[\\[\\]]", "")
                    + (pids.size() > 5 ? ", ..." : "") + ")"
                    + a.request().holder().map(h -> ", started by " + h).orElse("") + "; nothing was released."
                    + " End the job (Ctrl-C its gpusched run, or kill " + a.request().holder().map(h -> "pid "
                            + h.pid()).orElse("its processes")
                    + ") and its GPUs are released with it");
        }
    }

    @Override
    public Allocation recordJobCgroup(String allocationId, Path cgroup) {
        Objects.requireNonNull(allocationId, "allocationId");
        Objects.requireNonNull(cgroup, "cgroup");
        String dir = GpuRequest.checkCgroup(cgroup.toString());
        try {
            JobCgroups.check(cgroup, allocationId);
        } catch (JobCgroupException e) {
            throw new IllegalArgumentException(e.getMessage(), e);
        }
        return ledger.commit((state, seq) -> {
            Allocation a = state.live.get(allocationId);
            if (a == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + allocationId
                        + "\" to record a job cgroup for" + (issued(allocationId, state) ? " (it was released)"
                                : "; this node's ids look like " + idPrefix + "-N"));
            }
            if (a.request().jobCgroup().isPresent()) {
                if (a.request().jobCgroup().get().equals(dir)) {
                    return Ledger.Decision.of(a);
                }
                throw new IllegalArgumentException("allocation " + allocationId + " already has job cgroup "
                        + a.request().jobCgroup().get() + "; a job cgroup is recorded once");
            }
            return Ledger.Decision.of(new Allocation(a.id(), a.devices(), a.request().withJobCgroup(dir),
                    a.createdAt(), a.expiresAt(), a.placement()), new LedgerRecord.JobCgroup(allocationId, dir));
        });
    }

    @Override
    public Allocation recordJobProcess(String allocationId, HolderProcess process) {
        Objects.requireNonNull(allocationId, "allocationId");
        Objects.requireNonNull(process, "process");
        return ledger.commit((state, seq) -> {
            Allocation a = state.live.get(allocationId);
            if (a == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + allocationId
                        + "\" to record a job process for" + (issued(allocationId, state) ? " (it was released)"
                                : "; this node's ids look like " + idPrefix + "-N"));
            }
            if (a.request().jobProcess().isPresent()) {
                if (a.request().jobProcess().get().equals(process)) {
                    return Ledger.Decision.of(a);
                }
                throw new IllegalArgumentException("allocation " + allocationId + " already has job process "
                        + a.request().jobProcess().get() + "; a job process is recorded once");
            }
            return Ledger.Decision.of(new Allocation(a.id(), a.devices(), a.request().withJobProcess(process),
                    a.createdAt(), a.expiresAt(), a.placement()), new LedgerRecord.JobProcess(allocationId, process));
        });
    }

    @Override
    public boolean issued(String allocationId) {
        Objects.requireNonNull(allocationId, "allocationId");
        return ledger.read(s -> issued(allocationId, s));
    }

    @Override
    public Allocation releaseAndAllocate(Collection<String> releaseIds, GpuRequest request) {
        List<String> ids = distinctIds(releaseIds, "releaseIds");
        Objects.requireNonNull(request, "request");
        if (ids.isEmpty()) {
            return allocate(request);
        }
        decideDrains(ids);
        try {
            return ledger.commit(releasing(ids, decideAllocation(request, null, null, quotaOf(request))));
        } catch (GpuAllocationException e) {
            rejected(request, e);
            throw e;
        }
    }

    @Override
    public List<Allocation> allocateInOrder(List<GpuRequest> requests) {
        List<GpuRequest> todo = List.copyOf(requests); // null list or element: NullPointerException
        if (todo.size() <= 1) {
            return todo.isEmpty() ? List.of() : List.of(allocate(todo.get(0)));
        }
        List<UserQuotas.Limit> quotas = new ArrayList<>(todo.size()); // looked up outside the lock (may be null)
        for (GpuRequest r : todo) {
            quotas.add(quotaOf(r));
        }
        try {
            return ledger.commit(inOrder(todo, quotas));
        } catch (GpuAllocationException e) {
            rejected(todo.get(0), e);
            throw e;
        }
    }

    /**
     * The grants of {@code requests} in order, each decided (under the lock, on the latest state) on the state the
     * ones before it leave (a copy: a change never modifies the state it is given), up to the first refusal, as one
     * decision: its records are appended together or not at all. A refusal of the first refuses the whole.
     */
    private Ledger.Change<List<Allocation>> inOrder(List<GpuRequest> requests, List<UserQuotas.Limit> quotas) {
        return (state, seq) -> {
            List<LedgerRecord> records = new ArrayList<>();
            List<Allocation> granted = new ArrayList<>(requests.size());
            List<Runnable> undos = new ArrayList<>();
            grantInOrder(requests, quotas, state, state, seq, records, granted, undos).ifPresent(e -> {
                if (granted.isEmpty()) {
                    throw e; // nothing after a refused request is tried: it is asked again by itself
                }
            });
            return new Ledger.Decision<>(records, List.copyOf(granted),
                    undos.isEmpty() ? null : () -> undos.forEach(Runnable::run));
        };
    }

    @Override
    public ReleasesAndGrants releaseEachThenAllocateInOrder(List<String> releaseIds, List<GpuRequest> requests) {
        return releaseEachThenAllocateInOrder(releaseIds, requests, Set.of());
    }

    @Override
    public ReleasesAndGrants releaseEachThenAllocateInOrder(List<String> releaseIds, List<GpuRequest> requests,
            Set<Integer> withheld) {
        Set<Integer> kept = Set.copyOf(withheld);
        List<String> ids = List.copyOf(releaseIds); // null list or element: NullPointerException
        List<GpuRequest> todo = List.copyOf(requests);
        List<UserQuotas.Limit> quotas = new ArrayList<>(todo.size()); // looked up outside the lock (may be null)
        for (GpuRequest r : todo) {
            quotas.add(quotaOf(r));
        }
        decideDrains(ids);
        ReleasesAndGrants done = ledger.commit(handOff(ids, todo, quotas, kept));
        if (done.grants().isEmpty() && done.refusal().orElse(null) instanceof GpuAllocationException e) {
            rejected(todo.get(0), e);
        }
        return done;
    }

    /**
     * Decides {@code requests} in order, each on the state the ones before it leave ({@code at}, copied from
     * {@code state} before its first change: a change never modifies the state it is given), adding their records,
     * grants and undos, up to the first refusal.
     *
     * @return the first refusal; nothing after it is tried
     */
    private Optional<RuntimeException> grantInOrder(List<GpuRequest> requests, List<UserQuotas.Limit> quotas,
            NodeState state, NodeState at, long seq, List<LedgerRecord> records, List<Allocation> granted,
            List<Runnable> undos) {
        for (int i = 0; i < requests.size(); i++) {
            Ledger.Decision<Allocation> d;
            try {
                d = decideAllocation(requests.get(i), null, null, quotas.get(i)).decide(at, seq + records.size());
            } catch (RuntimeException e) {
                return Optional.of(e);
            }
            granted.add(d.result());
            if (d.undo() != null) {
                undos.add(d.undo());
            }
            if (i + 1 < requests.size()) {
                if (at == state) {
                    at = state.copy();
                }
                long next = seq + records.size();
                for (LedgerRecord r : d.records()) {
                    at.apply(next++, r, null);
                }
            }
            records.addAll(d.records());
        }
        return Optional.empty();
    }

    /**
     * The releases of {@code ids}, each decided alone (a refused one is reported, the others go ahead), then the grants
     * of {@code requests} in order on the state the releases leave, up to the first refusal (reported), as one
     * decision: its records are appended together or not at all.
     */
    private Ledger.Change<ReleasesAndGrants> handOff(List<String> ids, List<GpuRequest> requests,
            List<UserQuotas.Limit> quotas, Set<Integer> withheld) {
        return (state, seq) -> {
            List<LedgerRecord> records = new ArrayList<>();
            List<ReleasesAndGrants.Release> released = new ArrayList<>(ids.size());
            NodeState at = state;
            Instant now = clock.instant();
            for (String id : ids) {
                Allocation a = at.live.get(id);
                try {
                    if (a == null) {
                        if (!issued(id, at)) {
                            throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no allocation \"" + id
                                    + "\" was issued by this node (its ids look like " + idPrefix + "-N; "
                                    + at.live.size() + " live)");
                        }
                        released.add(new ReleasesAndGrants.Release(id, false, Optional.empty()));
                        continue;
                    }
                    refuseWhileJobRuns(a);
                } catch (RuntimeException e) {
                    released.add(new ReleasesAndGrants.Release(id, false, Optional.of(e)));
                    continue;
                }
                LedgerRecord r = new Released(a.id(), Cause.RELEASED, now, drain.drainOf(a), Optional.empty());
                if (at == state) {
                    at = state.copy();
                }
                at.apply(seq + records.size(), r, null);
                records.add(r);
                released.add(new ReleasesAndGrants.Release(id, true, Optional.empty()));
            }
            List<Allocation> granted = new ArrayList<>(requests.size());
            List<Runnable> undos = new ArrayList<>();
            if (!withheld.isEmpty()) { // in a copy only: the records say nothing of them
                if (at == state) {
                    at = state.copy();
                }
                for (int index : withheld) {
                    Integer pos = at.positionOfIndex(index);
                    if (pos != null && at.state(pos).pool() == Pool.IN_POOL) {
                        at.set(pos, at.state(pos).withPool(Pool.DRAINING, Optional.of("owed to a request waiting"
                                + " ahead in the node service's queue"), Optional.empty()));
                    }
                }
            }
            Optional<RuntimeException> refusal =
                    grantInOrder(requests, quotas, state, at, seq, records, granted, undos);
            return new Ledger.Decision<>(records, new ReleasesAndGrants(released, granted, refusal),
                    undos.isEmpty() ? null : () -> undos.forEach(Runnable::run));
        };
    }

    @Override
    public int releaseAll(Collection<String> allocationIds) {
        List<String> ids = distinctIds(allocationIds, "allocationIds");
        if (ids.isEmpty()) {
            return 0;
        }
        decideDrains(ids);
        return ledger.commit((state, seq) -> {
            List<LedgerRecord> records = releases(ids, state);
            return new Ledger.Decision<>(records, records.size());
        });
    }

    private static List<String> distinctIds(Collection<String> ids, String what) {
        Objects.requireNonNull(ids, what);
        LinkedHashSet<String> out = new LinkedHashSet<>(ids.size() * 2);
        for (String id : ids) {
            out.add(Objects.requireNonNull(id, () -> "an id in " + what + " is null"));
        }
        return List.copyOf(out);
    }

    /** As {@link #release}: asks the released allocations' own GPUs whether they drain, outside the lock. */
    private void decideDrains(List<String> ids) {
        if (!drain.decided()) {
            for (String id : ids) {
                Allocation held = ledger.readLocal(s -> s.live.get(id));
                if (held != null) {
                    drain.decideIfUndecided(held.devices());
                }
            }
        }
    }

    /**
     * @return the release records of the live ones of {@code ids}; ids released before are skipped
     * @throws GpuAllocationException UNKNOWN_ALLOCATION for an id the node never issued
     */
    private List<LedgerRecord> releases(List<String> ids, NodeState state) {
        Instant now = clock.instant();
        List<LedgerRecord> records = new ArrayList<>(ids.size() + 1);
        for (String id : ids) {
            Allocation a = state.live.get(id);
            if (a != null) {
                refuseWhileJobRuns(a);
                records.add(new Released(a.id(), Cause.RELEASED, now, drain.drainOf(a), Optional.empty()));
            } else if (!issued(id, state)) {
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no allocation \"" + id
                        + "\" was issued by this node (its ids look like " + idPrefix + "-N; " + state.live.size()
                        + " live); nothing was released or allocated");
            }
        }
        return records;
    }

    /**
     * The releases of {@code ids}, then {@code then} decided on the state they leave (a copy: a change never modifies
     * the state it is given), as one decision: its records are appended together or not at all. A refusal of
     * {@code then}, or an id the node never issued, refuses the whole.
     */
    private <T> Ledger.Change<T> releasing(List<String> ids, Ledger.Change<T> then) {
        return (state, seq) -> {
            List<LedgerRecord> records = releases(ids, state);
            if (records.isEmpty()) {
                return then.decide(state, seq);
            }
            NodeState after = state.copy();
            for (int i = 0; i < records.size(); i++) {
                after.apply(seq + i, records.get(i), null);
            }
            Ledger.Decision<T> d = then.decide(after, seq + records.size());
            records.addAll(d.records());
            return new Ledger.Decision<>(records, d.result(), d.undo());
        };
    }

    @Override
    public Allocation renew(String allocationId, Duration duration) {
        Objects.requireNonNull(allocationId, "allocationId");
        if (duration.isNegative() || duration.isZero()) {
            throw new IllegalArgumentException("a lease must be renewed for a positive duration, was " + duration);
        }
        Allocation renewed = ledger.commit((state, seq) -> {
            Allocation a = state.live.get(allocationId);
            if (a == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + allocationId
                        + "\" to renew" + (issued(allocationId, state) ? " (it was released)"
                                : "; this node's ids look like " + idPrefix + "-N"));
            }
            Instant until = clock.instant().plus(duration);
            return Ledger.Decision.of(a.withExpiry(Optional.of(until)), new Renewed(allocationId, until));
        });
        leases.renewed(allocationId);
        return renewed;
    }

    /** @return true if the node issued this id: an allocation record's sequence under the node's prefix */
    private boolean issued(String id, NodeState state) {
        return state.issued(id, idPrefix);
    }

    // ---------------------------------------------------------------- maintenance

    @Override
    public void maintain() {
        ledger.refresh(); // ends the leases that end their allocations (housekeeping), in memory as on the node
        Instant now = clock.instant();
        List<Allocation> expired = leases.newlyExpired(ledger.readLocal(s -> List.copyOf(s.live.values())), now);
        List<AllocationEvent> events = new ArrayList<>();
        for (Allocation a : expired) {
            events.add(new AllocationEvent(AllocationEvent.Type.EXPIRED, now, Optional.of(a.id()), a.owner(),
                    a.request().jobId(), a.deviceUuids(), Optional.empty(), "lease of " + a.id() + " ended at "
                            + a.expiresAt().get() + (jobs.waiting(a.id()) ? "; its job could not be ended yet"
                                    : "; stop the job and release")));
        }
        fire(events);
        drain.maintain(ledger, now);
    }

    @Override
    public boolean clearQuarantine(int deviceIndex) {
        return ledger.commit((state, seq) -> {
            Integer p = state.positionOfIndex(deviceIndex);
            if (p == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU index " + deviceIndex
                        + " is not on this node");
            }
            DeviceState d = state.state(p);
            if (d.pool() != Pool.QUARANTINED) {
                return Ledger.Decision.of(false);
            }
            return Ledger.Decision.of(true, new PoolChanged(d.device().uuid(), Pool.IN_POOL,
                    Optional.of("quarantine cleared"), Optional.of(clock.instant())));
        });
    }

    @Override
    public boolean drain(int deviceIndex, String reason) {
        Objects.requireNonNull(reason, "reason");
        return ledger.commit((state, seq) -> {
            DeviceState d = deviceAt(state, deviceIndex);
            if (d.pool() == Pool.CORDONED) {
                return Ledger.Decision.of(false);
            }
            return Ledger.Decision.of(true, new PoolChanged(d.device().uuid(), Pool.CORDONED,
                    Optional.of(reason.isBlank() ? "drained" : reason), Optional.of(clock.instant())));
        });
    }

    @Override
    public boolean undrain(int deviceIndex) {
        return ledger.commit((state, seq) -> {
            DeviceState d = deviceAt(state, deviceIndex);
            if (d.pool() != Pool.CORDONED) {
                return Ledger.Decision.of(false);
            }
            return Ledger.Decision.of(true, new PoolChanged(d.device().uuid(), Pool.IN_POOL,
                    Optional.of("undrained"), Optional.of(clock.instant())));
        });
    }

    private static DeviceState deviceAt(NodeState state, int deviceIndex) {
        Integer p = state.positionOfIndex(deviceIndex);
        if (p == null) {
            throw new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU index " + deviceIndex
                    + " is not on this node");
        }
        return state.state(p);
    }

    @Override
    public List<String> recoveryProblems() {
        return recoveryProblems;
    }

    @Override
    public Optional<LedgerStatistics> ledgerStatistics() {
        LedgerFile f = ledger.file();
        return f == null ? Optional.empty() : Optional.of(f.statistics());
    }

    /** For tests in this package: the scheduler's ledger. */
    Ledger ledger() {
        return ledger;
    }

    /** @return the node ledger, or null (tests, benchmarks) */
    LedgerFile ledgerFile() {
        return ledger.file();
    }

    /**
     * @return whether only this process's user can have written the node ledger's records (a ledger file of its own,
     *     shared with no state group; or no ledger file at all): only then does a reclaim trust a recorded job process
     *     enough to SIGKILL it
     */
    private boolean ledgerWrittenByUsAlone() {
        return !ledger.durable() || ledger.file().group() == StateGroup.NONE && StateDirectory.writtenByThisUserAlone(
                ledger.file().directory());
    }

    /** @return waiting allocations of this process (tests) */
    long waiting() {
        return waiters.waiting();
    }

    @Override
    public void refresh() {
        ledger.refresh();
    }

    @Override
    public Optional<Path> stateDir() {
        return ledger.durable() ? Optional.of(ledger.file().directory()) : Optional.empty();
    }

    @Override
    public void updateMetrics(GpuSample sample) {
        ledger.local(s -> {
            for (GpuMetrics m : sample.metrics()) {
                Integer p = s.positionOfIndex(m.index());
                if (p != null) {
                    s.set(p, s.state(p).withMetrics(Optional.of(m)));
                }
            }
        });
    }

    // ---------------------------------------------------------------- reads

    @Override
    public List<Allocation> allocations() {
        return ledger.read(s -> List.copyOf(s.live.values()));
    }

    @Override
    public Optional<Allocation> allocation(String allocationId) {
        return ledger.read(s -> Optional.ofNullable(s.live.get(allocationId)));
    }

    @Override
    public List<DeviceState> devices() {
        if (ledger.durable()) {
            ledger.refresh();
        }
        return ledger.devices();
    }

    @Override
    public SchedulerStatus status() {
        record Both(List<DeviceState> devices, List<Allocation> allocations) {
        }
        Both both = ledger.read(s -> new Both(s.snapshot(), List.copyOf(s.live.values())));
        List<String> notes = new ArrayList<>();
        if (!drain.decided()) {
            notes.add("no GPU of " + inventory.backend() + " has answered a process listing yet (all sick or"
                    + " failing): released GPUs return to the pool at once until one does; maintenance and every"
                    + " release ask again");
        } else if (!drain.supported()) {
            notes.add("inventory " + inventory.backend() + " cannot list GPU processes: released GPUs return to the"
                    + " pool at once, without draining");
        }
        if (ledger.durable()) {
            notes.add("node ledger " + ledger.file().path() + ": allocations of every process of this node");
        }
        notes.addAll(jobs.notes(both.allocations().stream().map(Allocation::id).toList()));
        notes.addAll(recoveryProblems);
        return Statuses.of(inventory.backend(), config.enabled(), strategy.name(), clock.instant(), both.devices(),
                both.allocations(), drain.supported(), notes);
    }

    @Override
    public String statusJson() {
        return Json.pretty(status());
    }

    @Override
    public GpuInventory inventory() {
        return inventory;
    }

    @Override
    public AllocationStrategy strategy() {
        return strategy;
    }

    @Override
    public void close() {
        waiters.close();
        if (tickets != null) {
            tickets.close();
        }
        health.close();
        for (ScheduledExecutorService t : threads) {
            t.shutdownNow();
        }
        ledger.close();
    }

    @Override
    public void addListener(AllocationListener listener) {
        added.add(Objects.requireNonNull(listener, "listener"));
    }

    @Override
    public boolean removeListener(AllocationListener listener) {
        return added.remove(listener);
    }

    /**
     * Hands the events of one transaction to every listener: a lone event to {@link AllocationListener#onEvent},
     * several to {@link AllocationListener#onEvents} at once (so a listener that forces a write per event can force
     * once for the transaction); each listener gets them in order.
     */
    private void fire(List<AllocationEvent> events) {
        if (events.size() == 1) {
            AllocationEvent e = events.get(0);
            for (AllocationListener l : listeners) {
                notify(l, e);
            }
            for (AllocationListener l : added) {
                notify(l, e);
            }
            return;
        }
        if (events.isEmpty()) {
            return;
        }
        List<AllocationEvent> all = List.copyOf(events);
        for (AllocationListener l : listeners) {
            notify(l, all);
        }
        for (AllocationListener l : added) {
            notify(l, all);
        }
    }

    private static void notify(AllocationListener l, AllocationEvent e) {
        try {
            l.onEvent(e);
        } catch (VirtualMachineError vm) {
            if (!(vm instanceof StackOverflowError)) {
                throw vm; // out of memory, an internal error: the JVM's, not the listener's
            }
            LOG.warn("allocation listener {} failed on {}: {}", l, e.type(), vm.toString());
        } catch (Exception | Error ex) { // a listener's linkage or assertion error, too, is the listener's alone
            LOG.warn("allocation listener {} failed on {}: {}", l, e.type(), ex.toString());
        }
    }

    private static void notify(AllocationListener l, List<AllocationEvent> events) {
        try {
            l.onEvents(events);
        } catch (VirtualMachineError vm) {
            if (!(vm instanceof StackOverflowError)) {
                throw vm;
            }
            LOG.warn("allocation listener {} failed on {} events: {}", l, events.size(), vm.toString());
        } catch (Exception | Error ex) {
            LOG.warn("allocation listener {} failed on {} events: {}", l, events.size(), ex.toString());
        }
    }

    @Override
    public String toString() {
        return "GpuScheduler[" + inventory.backend() + ", " + strategy.name() + ", " + ledger.devices().size()
                + " GPUs" + (ledger.durable() ? ", ledger " + ledger.file().directory() : "") + "]";
    }
}
