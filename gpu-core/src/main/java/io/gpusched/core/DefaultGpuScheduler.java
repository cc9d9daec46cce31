package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.internal.Json;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The scheduler: one lock around a small array of immutable {@link DeviceState}s, a condition that waiters sleep on,
 * and an optional journal written before each call returns. Events go to listeners after the lock is released.
 */
final class DefaultGpuScheduler implements GpuScheduler {
    private static final Logger LOG = LoggerFactory.getLogger(DefaultGpuScheduler.class);

    private final GpuInventory inventory;
    private final AllocationStrategy strategy;
    private final GpuConfig config;
    private final Clock clock;
    private final List<AllocationListener> listeners;
    private final GpuTopology topology;
    private final Map<Integer, Integer> positionByIndex = new HashMap<>();
    private final Map<String, Integer> positionByUuid = new HashMap<>();
    private final String idPrefix;
    private final GpuHealthListener healthListener = this::onHealthChange;
    private final List<ScheduledExecutorService> threads = new ArrayList<>();
    private final boolean drainSupported;
    private final List<String> recoveryProblems;
    private final Journal journal;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    /** Guarded by lock; replaced element-wise, elements immutable. */
    private final DeviceState[] states;
    /** Guarded by lock. */
    private final Map<String, Allocation> live = new LinkedHashMap<>();
    /** Guarded by lock: allocations whose expiry was reported. */
    private final Set<String> expiredReported = new HashSet<>();
    /** Guarded by lock. */
    private final Map<String, TokenBucket> buckets = new HashMap<>();
    /** Guarded by lock: FCFS tickets of waiting allocations. */
    private long nextTicket;
    private long serving;
    private final Set<Long> abandoned = new HashSet<>();
    /** Guarded by lock. */
    private long sequence;
    /** Published copy of {@link #states}, rebuilt under the lock after each change. */
    private volatile List<DeviceState> snapshot;

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
        this.topology = inventory.topology();
        List<GpuDevice> devices = inventory.devices();
        this.states = new DeviceState[devices.size()];
        for (int i = 0; i < devices.size(); i++) {
            GpuDevice d = devices.get(i);
            if (positionByIndex.put(d.index(), i) != null || positionByUuid.put(d.uuid(), i) != null) {
                throw new IllegalArgumentException("inventory " + inventory.backend() + " lists device "
                        + d.index() + " (" + d.uuid() + ") twice");
            }
            states[i] = DeviceState.idle(d, inventory.health(d));
        }
        this.drainSupported = !devices.isEmpty() && inventory.processes(devices.get(0)).isPresent();
        List<String> problems = new ArrayList<>();
        String prefix = null;
        if (b.journal != null) {
            Journal.Recovered r = Journal.replay(b.journal);
            problems.addAll(r.warnings());
            prefix = r.prefix().orElse(null);
            sequence = r.sequence();
            recover(r, problems, b.strictRecovery);
        }
        if (prefix == null) {
            byte[] rnd = new byte[3];
            new SecureRandom().nextBytes(rnd);
            prefix = String.format(Locale.ROOT, "a%02x%02x%02x", rnd[0], rnd[1], rnd[2]);
        }
        this.idPrefix = prefix;
        this.recoveryProblems = List.copyOf(problems);
        for (String p : problems) {
            LOG.warn("journal recovery: {}", p);
        }
        this.journal = b.journal == null ? null : Journal.compactAndOpen(b.journal, idPrefix, sequence, live.values());
        this.snapshot = List.of(states);
        inventory.addHealthListener(healthListener);
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

    /** Re-applies the journal's live allocations; a device that is gone is reported (or refused when strict). */
    private void recover(Journal.Recovered r, List<String> problems, boolean strict) {
        for (Journal.Entry e : r.live().values()) {
            List<GpuDevice> devs = new ArrayList<>();
            for (String uuid : e.uuids()) {
                Integer p = positionByUuid.get(uuid);
                if (p == null) {
                    String msg = "allocation " + e.id() + " held GPU " + uuid + ", which the inventory "
                            + inventory.backend() + " no longer has";
                    if (strict) {
                        throw new GpuException("refusing to start (strict recovery): " + msg);
                    }
                    problems.add(msg);
                } else {
                    devs.add(states[p].device());
                }
            }
            Allocation a = new Allocation(e.id(), devs, e.request(), e.createdAt(), e.expiresAt());
            for (GpuDevice d : devs) {
                hold(positionByIndex.get(d.index()), a);
            }
            live.put(a.id(), a);
        }
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
        java.util.Objects.requireNonNull(request, "request");
        Allocation a;
        try {
            lock.lock();
            try {
                a = allocateHeld(request);
            } finally {
                lock.unlock();
            }
        } catch (GpuAllocationException e) {
            rejected(request, e);
            throw e;
        }
        allocated(a);
        return a;
    }

    @Override
    public Allocation allocate(GpuRequest request, Duration maxWait) throws InterruptedException {
        java.util.Objects.requireNonNull(request, "request");
        long deadline = System.nanoTime() + Math.max(0, maxWait.toNanos());
        GpuAllocationException last = null;
        Allocation a = null;
        lock.lockInterruptibly();
        long ticket = nextTicket++;
        try {
            while (true) {
                if (ticket == serving) {
                    try {
                        a = allocateHeld(request);
                        advance();
                        break;
                    } catch (GpuAllocationException e) {
                        last = e;
                        if (!e.reason().isTransient()) {
                            advance();
                            break;
                        }
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    if (ticket == serving) {
                        advance();
                    } else {
                        abandoned.add(ticket);
                    }
                    break;
                }
                try {
                    changed.awaitNanos(left);
                } catch (InterruptedException ie) {
                    if (ticket == serving) {
                        advance();
                    } else {
                        abandoned.add(ticket);
                    }
                    throw ie;
                }
            }
        } finally {
            lock.unlock();
        }
        if (a != null) {
            allocated(a);
            return a;
        }
        GpuAllocationException e = last != null ? last : new GpuAllocationException(Reason.INSUFFICIENT_GPUS,
                request.describe() + " requested; still waiting behind earlier requests after " + maxWait);
        if (e.reason().isTransient()) {
            e = new GpuAllocationException(e.reason(), e.getMessage() + " (waited " + maxWait + ")");
        }
        rejected(request, e);
        throw e;
    }

    /** Moves the FCFS queue to the next waiter that has not given up; caller holds the lock. */
    private void advance() {
        serving++;
        while (abandoned.remove(serving)) {
            serving++;
        }
        changed.signalAll();
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

    private void allocated(Allocation a) {
        fire(new AllocationEvent(AllocationEvent.Type.ALLOCATED, a.createdAt(), Optional.of(a.id()),
                a.owner(), a.request().jobId(), a.deviceUuids(), Optional.empty(), a.request().describe()));
    }

    private void rejected(GpuRequest request, GpuAllocationException e) {
        fire(new AllocationEvent(AllocationEvent.Type.REJECTED, clock.instant(), Optional.empty(),
                request.owner(), request.jobId(), List.of(), Optional.of(e.reason()), e.getMessage()));
    }

    /** Caller holds the lock. */
    private Allocation allocateHeld(GpuRequest request) {
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
            throw new GpuAllocationException(Reason.INVALID_REQUEST,
                    "shared GPUs requested, but sharing is disabled (gpu.allow_sharing: false); ask for exclusive GPUs");
        }
        if (config.rateLimitPerSecond() > 0) {
            String owner = request.owner().orElse("(anonymous)");
            Instant now = clock.instant();
            Duration wait = buckets.computeIfAbsent(owner,
                    o -> new TokenBucket(config.rateLimitPerSecond(), config.rateLimitBurst(), now)).take(now);
            if (!wait.isZero()) {
                throw new GpuAllocationException(Reason.RATE_LIMITED, "owner " + owner + " is over its rate limit of "
                        + config.rateLimitPerSecond() + " allocations/s (burst " + config.rateLimitBurst()
                        + "); retry in " + Math.max(1, wait.toMillis()) + " ms");
            }
        }
        List<DeviceState> candidates = request.isExplicit() ? explicitCandidates(request) : candidates(request);
        View view = new View(snapshot, candidates, topology, clock.instant());
        List<Integer> picked = strategy.select(request, view);
        if (picked == null || picked.isEmpty()) {
            throw new GpuAllocationException(Reason.NO_PLACEMENT, "strategy " + strategy.name()
                    + " found no placement for " + request.describe() + " among " + candidates.size()
                    + " eligible GPUs " + indices(candidates));
        }
        return commit(request, checkPick(request, candidates, picked));
    }

    private List<GpuDevice> checkPick(GpuRequest request, List<DeviceState> candidates, List<Integer> picked) {
        Map<Integer, DeviceState> byIndex = new HashMap<>();
        for (DeviceState d : candidates) {
            byIndex.put(d.index(), d);
        }
        List<GpuDevice> chosen = new ArrayList<>(picked.size());
        Set<Integer> seen = new HashSet<>();
        for (Integer i : picked) {
            DeviceState d = i == null ? null : byIndex.get(i);
            if (d == null || !seen.add(i)) {
                chosen = null;
                break;
            }
            chosen.add(d.device());
        }
        if (chosen == null || chosen.size() != request.count()) {
            throw new GpuException("strategy " + strategy.name() + " returned " + picked + " for "
                    + request.describe() + "; it must return " + request.count() + " distinct indices out of "
                    + indices(candidates) + " (a bug in the strategy; nothing was allocated)");
        }
        return chosen;
    }

    private Allocation commit(GpuRequest request, List<GpuDevice> chosen) {
        Instant now = clock.instant();
        String id = idPrefix + "-" + (sequence + 1);
        Allocation a = new Allocation(id, chosen, request, now, request.maxDuration().map(now::plus));
        if (journal != null) {
            journal.allocatedDurably(a);
        }
        sequence++;
        for (GpuDevice d : chosen) {
            hold(positionByIndex.get(d.index()), a);
        }
        live.put(id, a);
        snapshot = List.of(states);
        return a;
    }

    private void hold(int p, Allocation a) {
        DeviceState s = states[p];
        if (a.sharing() == SharingMode.EXCLUSIVE) {
            states[p] = s.withExclusive(Optional.of(a.id()));
        } else {
            states[p] = s.withShared(s.sharedHolders() + 1, s.sharedReserved().plus(a.sharedMemory().get()));
        }
    }

    /** Applies hard constraints step by step, so that a refusal names the first one that could not be met. */
    private List<DeviceState> candidates(GpuRequest r) {
        int n = r.count();
        List<DeviceState> all = snapshot;
        if (n > all.size()) {
            throw new GpuAllocationException(Reason.INSUFFICIENT_GPUS, r.describe() + " requested; this node has "
                    + all.size() + (all.size() == 1 ? " GPU" : " GPUs") + " in all");
        }
        List<DeviceState> matching = filter(all, d -> matchesIdentity(r, d.device()));
        if (matching.size() < n) {
            throw new GpuAllocationException(Reason.NO_MATCHING_DEVICE, r.describe() + " requested; "
                    + matching.size() + " of the node's " + all.size() + " GPUs match (the node has "
                    + inventorySummary(all) + ")");
        }
        List<DeviceState> roomy = filter(matching, d -> hasMemory(r, d.device()));
        if (roomy.size() < n) {
            MemorySize largest = matching.stream().map(d -> d.device().memory()).max(MemorySize::compareTo).get();
            long free = matching.stream().filter(d -> d.isIdle() && d.isAllocatable()).count();
            throw new GpuAllocationException(Reason.INSUFFICIENT_MEMORY, r.describe() + " requested; "
                    + free + " free, " + (roomy.isEmpty() ? "none has" : "only " + roomy.size() + " of "
                    + matching.size() + " matching have") + " enough memory (the largest has "
                    + largest.toHumanString() + ")");
        }
        List<DeviceState> usable = filter(roomy, d -> d.health().isHealthy() && d.pool() != Pool.QUARANTINED);
        if (usable.size() < n) {
            String sick = roomy.stream().filter(d -> !d.health().isHealthy() || d.pool() == Pool.QUARANTINED)
                    .map(d -> "GPU " + d.index() + " " + (d.health().isHealthy() ? "quarantined: "
                            + d.poolReason().orElse("") : d.health().toString())).collect(Collectors.joining(", "));
            throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, r.describe() + " requested; only "
                    + usable.size() + " of " + roomy.size() + " suitable GPUs are healthy (" + sick + ")");
        }
        List<DeviceState> free = filter(usable, d -> d.pool() == Pool.IN_POOL && isAvailable(r, d));
        if (free.size() < n) {
            String why = r.sharing() == SharingMode.SHARED
                    ? " have " + r.sharedMemory().get().toHumanString() + " unreserved and are not held exclusively"
                    : " are free";
            long draining = usable.stream().filter(d -> d.pool() == Pool.DRAINING).count();
            throw new GpuAllocationException(Reason.INSUFFICIENT_GPUS, r.describe() + " requested; "
                    + free.size() + " of " + usable.size() + " suitable GPUs" + why + " (held: " + holders(usable)
                    + (draining > 0 ? "; " + draining + " draining" : "") + ")");
        }
        return free;
    }

    private List<DeviceState> explicitCandidates(GpuRequest r) {
        List<DeviceState> out = new ArrayList<>();
        if (!r.deviceIndices().isEmpty()) {
            for (int i : r.deviceIndices()) {
                Integer p = positionByIndex.get(i);
                if (p == null) {
                    throw new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU index " + i
                            + " is not on this node; its GPU indices are " + indices(snapshot));
                }
                out.add(states[p]);
            }
        } else {
            for (String u : r.deviceUuids()) {
                Integer p = positionByUuid.get(u);
                if (p == null) {
                    throw new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU " + u
                            + " is not on this node; its GPUs are " + snapshot.stream()
                            .map(d -> d.device().uuid()).toList());
                }
                out.add(states[p]);
            }
        }
        for (DeviceState d : out) {
            String which = "GPU " + d.index() + " (" + d.device().name() + ", " + d.device().uuid() + ")";
            if (!matchesIdentity(r, d.device())) {
                throw new GpuAllocationException(Reason.NO_MATCHING_DEVICE, which + " does not match "
                        + r.describe());
            }
            if (!hasMemory(r, d.device())) {
                throw new GpuAllocationException(Reason.INSUFFICIENT_MEMORY, which + " has "
                        + d.device().memory().toHumanString() + "; " + r.describe() + " requested");
            }
            if (!d.health().isHealthy()) {
                throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, which + " is " + d.health());
            }
            if (d.pool() == Pool.QUARANTINED) {
                throw new GpuAllocationException(Reason.DEVICE_UNHEALTHY, which + " is quarantined: "
                        + d.poolReason().orElse(""));
            }
            if (d.pool() == Pool.DRAINING) {
                throw new GpuAllocationException(Reason.DEVICE_BUSY, which + " is draining: "
                        + d.poolReason().orElse("processes of its last job are still exiting"));
            }
            if (!isAvailable(r, d)) {
                throw new GpuAllocationException(Reason.DEVICE_BUSY, which + " is busy: " + holders(List.of(d))
                        + (r.sharing() == SharingMode.SHARED ? "; " + d.reservableMemory().toHumanString()
                        + " reservable" : ""));
            }
        }
        return out;
    }

    private static boolean matchesIdentity(GpuRequest r, GpuDevice d) {
        return r.vendor().map(v -> v == d.vendor()).orElse(true)
                && r.matchesModel(d.name())
                && r.minComputeCapability().map(min -> d.computeCapability().map(cc -> cc.isAtLeast(min))
                        .orElse(false)).orElse(true);
    }

    private static boolean hasMemory(GpuRequest r, GpuDevice d) {
        return r.minMemory().map(m -> d.memory().isAtLeast(m)).orElse(true)
                && r.sharedMemory().map(m -> d.memory().isAtLeast(m)).orElse(true);
    }

    private static boolean isAvailable(GpuRequest r, DeviceState d) {
        if (r.sharing() == SharingMode.EXCLUSIVE) {
            return d.isIdle();
        }
        return d.exclusiveHolder().isEmpty() && d.reservableMemory().isAtLeast(r.sharedMemory().get());
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

    private static String indices(List<DeviceState> states) {
        return states.stream().map(d -> String.valueOf(d.index())).collect(Collectors.joining(",", "[", "]"));
    }

    private static String inventorySummary(List<DeviceState> all) {
        Map<String, Integer> kinds = new LinkedHashMap<>();
        for (DeviceState d : all) {
            GpuDevice g = d.device();
            String k = (g.name().toUpperCase(Locale.ROOT).startsWith(g.vendor().name()) ? "" : g.vendor() + " ")
                    + g.name() + " " + g.memory().toHumanString()
                    + g.computeCapability().map(c -> " cc " + c).orElse("")
                    + g.architecture().map(a -> " " + a).orElse("");
            kinds.merge(k, 1, Integer::sum);
        }
        return kinds.entrySet().stream().map(e -> e.getValue() + "x " + e.getKey()).collect(Collectors.joining(", "));
    }

    private static String holders(List<DeviceState> states) {
        List<String> parts = new ArrayList<>();
        for (DeviceState d : states) {
            if (d.exclusiveHolder().isPresent()) {
                parts.add("GPU " + d.index() + " by " + d.exclusiveHolder().get());
            } else if (d.isShared()) {
                parts.add("GPU " + d.index() + " shared by " + d.sharedHolders() + ", "
                        + d.reservableMemory().toHumanString() + " left");
            }
        }
        return parts.isEmpty() ? "none" : String.join("; ", parts);
    }

    // ---------------------------------------------------------------- release, renew

    @Override
    public boolean release(String allocationId) {
        java.util.Objects.requireNonNull(allocationId, "allocationId");
        Allocation a;
        lock.lock();
        try {
            a = live.get(allocationId);
            if (a == null) {
                if (issuedHere(allocationId)) {
                    return false;
                }
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no allocation \"" + allocationId
                        + "\" was issued by this scheduler (its ids look like " + idPrefix + "-N; "
                        + live.size() + " live)");
            }
            if (journal != null) {
                journal.releasedDurably(allocationId);
            }
            live.remove(allocationId);
            expiredReported.remove(allocationId);
            Instant now = clock.instant();
            for (GpuDevice d : a.devices()) {
                int p = positionByIndex.get(d.index());
                DeviceState s = states[p];
                if (a.sharing() == SharingMode.EXCLUSIVE) {
                    s = s.withExclusive(Optional.empty());
                } else {
                    MemorySize left = s.sharedReserved().minusOrZero(a.sharedMemory().get());
                    s = s.withShared(s.sharedHolders() - 1, s.sharedHolders() == 1 ? MemorySize.ZERO : left);
                }
                if (drainSupported && s.isIdle() && s.pool() == Pool.IN_POOL) {
                    s = s.withPool(Pool.DRAINING, Optional.of("released by " + a.id()
                            + "; waiting for its processes to exit"), Optional.of(now));
                }
                states[p] = s;
            }
            snapshot = List.of(states);
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        fire(new AllocationEvent(AllocationEvent.Type.RELEASED, clock.instant(), Optional.of(a.id()),
                a.owner(), a.request().jobId(), a.deviceUuids(), Optional.empty(), a.request().describe()));
        return true;
    }

    @Override
    public Allocation renew(String allocationId, Duration duration) {
        if (duration.isNegative() || duration.isZero()) {
            throw new IllegalArgumentException("a lease must be renewed for a positive duration, was " + duration);
        }
        Allocation renewed;
        lock.lock();
        try {
            Allocation a = live.get(allocationId);
            if (a == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + allocationId
                        + "\" to renew" + (issuedHere(allocationId) ? " (it was released)" : ""));
            }
            Instant until = clock.instant().plus(duration);
            if (journal != null) {
                journal.renewedDurably(allocationId, until);
            }
            renewed = a.withExpiry(Optional.of(until));
            live.put(allocationId, renewed);
            expiredReported.remove(allocationId);
        } finally {
            lock.unlock();
        }
        fire(new AllocationEvent(AllocationEvent.Type.RENEWED, clock.instant(), Optional.of(allocationId),
                renewed.owner(), renewed.request().jobId(), renewed.deviceUuids(), Optional.empty(),
                "lease now ends at " + renewed.expiresAt().get()));
        return renewed;
    }

    private boolean issuedHere(String id) {
        String head = idPrefix + "-";
        if (!id.startsWith(head) || id.length() == head.length() || id.length() > head.length() + 18) {
            return false;
        }
        String num = id.substring(head.length());
        return num.chars().allMatch(Character::isDigit) && Long.parseLong(num) <= sequence;
    }

    // ---------------------------------------------------------------- maintenance

    @Override
    public void maintain() {
        Instant now = clock.instant();
        List<Allocation> expired = new ArrayList<>();
        List<DeviceState> draining = new ArrayList<>();
        lock.lock();
        try {
            for (Allocation a : live.values()) {
                if (a.expiresAt().isPresent() && !a.expiresAt().get().isAfter(now) && expiredReported.add(a.id())) {
                    expired.add(a);
                }
            }
            for (DeviceState s : states) {
                if (s.pool() == Pool.DRAINING) {
                    draining.add(s);
                }
            }
        } finally {
            lock.unlock();
        }
        for (Allocation a : expired) {
            fire(new AllocationEvent(AllocationEvent.Type.EXPIRED, now, Optional.of(a.id()), a.owner(),
                    a.request().jobId(), a.deviceUuids(), Optional.empty(), "lease of " + a.id() + " ended at "
                    + a.expiresAt().get() + (config.releaseOnExpiry() ? "; released" : "; stop the job and release")));
            if (config.releaseOnExpiry()) {
                release(a.id());
            }
        }
        for (DeviceState s : draining) {
            Optional<List<GpuProcess>> procs;
            try {
                procs = inventory.processes(s.device());
            } catch (RuntimeException e) {
                LOG.warn("listing processes of GPU {} ({}) failed: {}", s.index(), s.device().uuid(), e.toString());
                continue;
            }
            List<GpuProcess> left = procs.orElse(List.of());
            AllocationEvent event = null;
            lock.lock();
            try {
                int p = positionByIndex.get(s.index());
                DeviceState cur = states[p];
                if (cur.pool() != Pool.DRAINING) {
                    continue;
                }
                if (left.isEmpty()) {
                    states[p] = cur.withPool(Pool.IN_POOL, Optional.empty(), Optional.empty());
                    event = new AllocationEvent(AllocationEvent.Type.DRAINED, now, Optional.empty(), Optional.empty(),
                            Optional.empty(), List.of(cur.device().uuid()), Optional.empty(),
                            "GPU " + cur.index() + " has no process left and is back in the pool");
                } else if (!cur.poolSince().orElse(now).plus(config.drainTimeout()).isAfter(now)) {
                    String reason = left.stream().map(pr -> "pid " + pr.pid() + pr.usedMemory()
                            .map(m -> " still holds " + m.toHumanString()).orElse(" is still running"))
                            .collect(Collectors.joining(", "));
                    states[p] = cur.withPool(Pool.QUARANTINED, Optional.of(reason), Optional.of(now));
                    event = new AllocationEvent(AllocationEvent.Type.QUARANTINED, now, Optional.empty(),
                            Optional.empty(), Optional.empty(), List.of(cur.device().uuid()), Optional.empty(),
                            "GPU " + cur.index() + " quarantined after " + config.drainTimeout() + ": " + reason);
                }
                snapshot = List.of(states);
                changed.signalAll();
            } finally {
                lock.unlock();
            }
            if (event != null) {
                fire(event);
            }
        }
    }

    @Override
    public boolean clearQuarantine(int deviceIndex) {
        lock.lock();
        try {
            Integer p = positionByIndex.get(deviceIndex);
            if (p == null) {
                throw new GpuAllocationException(Reason.UNKNOWN_DEVICE, "GPU index " + deviceIndex
                        + " is not on this node");
            }
            if (states[p].pool() != Pool.QUARANTINED) {
                return false;
            }
            states[p] = states[p].withPool(Pool.IN_POOL, Optional.empty(), Optional.empty());
            snapshot = List.of(states);
            changed.signalAll();
            return true;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public List<String> recoveryProblems() {
        return recoveryProblems;
    }

    // ---------------------------------------------------------------- health and metrics

    private void onHealthChange(GpuDevice device, GpuHealth health) {
        List<Allocation> affected = new ArrayList<>();
        lock.lock();
        try {
            Integer p = positionByUuid.get(device.uuid());
            if (p == null || states[p].health().equals(health)) {
                return;
            }
            states[p] = states[p].withHealth(health);
            snapshot = List.of(states);
            changed.signalAll();
            for (Allocation a : live.values()) {
                if (a.deviceUuids().contains(device.uuid())) {
                    affected.add(a);
                }
            }
        } finally {
            lock.unlock();
        }
        LOG.warn("GPU {} ({}) is now {}", device.index(), device.uuid(), health);
        for (Allocation a : affected) {
            fire(new AllocationEvent(AllocationEvent.Type.HEALTH_CHANGED, clock.instant(), Optional.of(a.id()),
                    a.owner(), a.request().jobId(), List.of(device.uuid()), Optional.empty(),
                    "GPU " + device.index() + " of allocation " + a.id() + " is now " + health));
        }
    }

    @Override
    public void updateMetrics(GpuSample sample) {
        lock.lock();
        try {
            for (GpuMetrics m : sample.metrics()) {
                Integer p = positionByIndex.get(m.index());
                if (p != null) {
                    states[p] = states[p].withMetrics(Optional.of(m));
                }
            }
            snapshot = List.of(states);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- reads

    @Override
    public List<Allocation> allocations() {
        lock.lock();
        try {
            return List.copyOf(live.values());
        } finally {
            lock.unlock();
        }
    }

    @Override
    public Optional<Allocation> allocation(String allocationId) {
        lock.lock();
        try {
            return Optional.ofNullable(live.get(allocationId));
        } finally {
            lock.unlock();
        }
    }

    @Override
    public List<DeviceState> devices() {
        return snapshot;
    }

    @Override
    public SchedulerStatus status() {
        List<DeviceState> devs;
        List<Allocation> allocs;
        lock.lock();
        try {
            devs = snapshot;
            allocs = List.copyOf(live.values());
        } finally {
            lock.unlock();
        }
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
        List<SchedulerStatus.Held> held = new ArrayList<>();
        for (Allocation a : allocs) {
            held.add(new SchedulerStatus.Held(a.id(), a.owner().orElse(null), a.request().jobId().orElse(null),
                    a.deviceIndices(), a.deviceUuids(), a.sharing().name(),
                    a.sharedMemory().map(MemorySize::bytes).orElse(null), a.createdAt().toString(),
                    a.request().labels(), a.expiresAt().map(Instant::toString).orElse(null)));
        }
        List<String> notes = new ArrayList<>();
        if (!drainSupported) {
            notes.add("inventory " + inventory.backend() + " cannot list GPU processes: released GPUs return to the"
                    + " pool at once, without draining");
        }
        notes.addAll(recoveryProblems);
        return new SchedulerStatus(inventory.backend(), config.enabled(), strategy.name(),
                clock.instant().toString(), out, held, drainSupported, notes);
    }

    private static Optional<Double> boxed(java.util.OptionalDouble d) {
        return d.isPresent() ? Optional.of(d.getAsDouble()) : Optional.empty();
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
        inventory.removeHealthListener(healthListener);
        for (ScheduledExecutorService t : threads) {
            t.shutdownNow();
        }
        if (journal != null) {
            journal.close();
        }
    }

    private void fire(AllocationEvent e) {
        for (AllocationListener l : listeners) {
            try {
                l.onEvent(e);
            } catch (RuntimeException ex) {
                LOG.warn("allocation listener {} failed on {}: {}", l, e.type(), ex.toString());
            }
        }
    }

    @Override
    public String toString() {
        return "GpuScheduler[" + inventory.backend() + ", " + strategy.name() + ", " + states.length + " GPUs]";
    }

    /** The immutable view handed to strategies. */
    private record View(List<DeviceState> devices, List<DeviceState> candidates, GpuTopology topology, Instant now)
            implements SchedulingView {
        View {
            candidates = List.copyOf(candidates);
        }

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
