package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuSample;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.host.HpcJobMapping;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's accounting sampler: fed each sweep of the GPUs by its host (the console's and the service's tick, so one
 * sweep feeds both the console's history and accounting), it credits usage to live allocations ({@link UsageMeter}),
 * writes their open intervals to the store every {@code gpu.accounting.checkpoint} and their last interval when they
 * end, runs the idle policy ({@link IdleWatch}) and audits its steps in the store, and compacts and prunes old days
 * once a day.
 *
 * <p>One per node: {@link #open} takes the store's sampler lock, and answers empty when another process holds it (a
 * second console on the node, {@code gpusched run} beside the service), so two samplers never count one allocation
 * twice. A sampler that starts continues every allocation from where the store left it ({@link
 * AccountingStore#recover}): what a crash lost (at most one checkpoint interval) is recorded as a {@code gap}, and
 * nothing is counted twice.
 *
 * <p>Thread-safe: sweeps and events may come from different threads. Writes are group-committed: what a sweep or an
 * event closes is queued in the meter's order (under this sampler's monitor) and written by whichever thread next
 * takes the store ({@link #write}), which appends everything queued and forces it once; {@link #onEvent} waits for
 * the force that covers its release's record outside the monitor, so releases of many threads share forces instead
 * of taking one each, in turn. When {@link #onEvent} returns for a release, its record is on disk; the scheduler's
 * {@code release} may return before the sampler gets the event, when another thread is still delivering earlier
 * events ({@code AllocationListener}; docs/ACCOUNTING.md, "Writes").
 */
public final class AccountingSampler implements AllocationListener, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(AccountingSampler.class);

    private final AccountingStore.Writer writer;
    private final AccountingSettings settings;
    private final GpuInventory inventory;
    /** the inventory's per-process usage, bound once (not a method reference made every sweep) */
    private final Function<GpuDevice, Optional<ProcessUsageSample>> processUsage;
    private final UsageMeter meter;
    private final IdleWatch idle;
    private final Clock clock;
    private Instant lastCheckpoint;
    /** sweep time since the last checkpoint: each sweep's step forward, at most a sweep's span (a clock step back or a
     *  jump ahead adds nothing), so checkpoints keep coming every interval whatever the wall clock does */
    private long sinceCheckpoint;
    /** System.nanoTime at the last checkpoint: a checkpoint is also due once this much real time has passed */
    private long checkpointNanos;
    /** the wall time of the previous sweep, -1 before the first */
    private long lastSweepMillis = -1;
    /** sweep time this sampler has run (as {@code sinceCheckpoint}, never reset) */
    private long ranMillis;
    /** the newest day the store held when this sampler started; null for an empty store */
    private final LocalDate newestAtOpen;
    private LocalDate clockWarnedFor;
    private long lastHousekeepingDay = Long.MIN_VALUE;
    private boolean first = true;
    private boolean closed;
    private final List<Consumer<Interval>> intervalListeners =
            new CopyOnWriteArrayList<>();
    /** records a failed append left, written first by the next one; guarded by {@link #io} */
    private final List<AccountingRecord> pending = new ArrayList<>();
    /** whether {@link #pending} holds records (written under {@link #io}, read by sweeps without it) */
    private volatile boolean retry;
    /** {@code gpu.accounting.checkpoint} in ms and ns */
    private final long checkpointMillis;
    private final long checkpointNanosEvery;
    /**
     * Held by the thread that writes the store (a batch of queued records, housekeeping, the close): the writer is not
     * thread-safe. Taken inside this sampler's monitor (sweeps) or without it (events), never the other way round.
     */
    private final ReentrantLock io = new ReentrantLock();
    /** records queued for the next batch, in the meter's order; guarded by itself, a leaf lock */
    private final ArrayDeque<Ticket> queue = new ArrayDeque<>();
    /** Most records kept while the store refuses writes. */
    static final int MAX_PENDING = 100_000;
    /** allocations granted (their events) that no sweep has seen yet */
    private final Map<String, AllocationEvent> granted = new HashMap<>();
    /**
     * Releases heard of allocations this sampler knew nothing of, before {@link #knownLive} told it their grants (the
     * host reads the live list, then calls it: a release in between would leave no record; review33); kept until
     * then, at most {@link #UNHEARD_MAX}
     */
    private final LinkedHashMap<String, AllocationEvent> unheard = new LinkedHashMap<>();
    private boolean toldLive;
    private static final int UNHEARD_MAX = 4096;
    /** dcgm-exporter's job-mapping directory, when the settings name one */
    private final HpcJobMapping jobMapping;
    private String jobMappingError;
    private boolean markWarned;
    /** pods and Slurm jobs as holders, when the attribution names them (null: it names allocations only) */
    private final ExternalHolders externals;

    private AccountingSampler(AccountingStore.Writer writer, AccountingSettings settings, GpuInventory inventory,
            ProcessAttribution attribution, IdleEffects effects, Clock clock) {
        this.writer = writer;
        this.settings = settings;
        this.inventory = inventory;
        this.processUsage = inventory::processUsage;
        this.clock = clock;
        this.checkpointMillis = settings.checkpoint().toMillis();
        this.checkpointNanosEvery = settings.checkpoint().toNanos();
        this.meter = new UsageMeter(settings.idle().threshold(), attribution);
        this.idle = new IdleWatch(settings.idle(), effects);
        this.jobMapping = settings.hpcJobMappingDir().map(HpcJobMapping::open).orElse(null);
        this.externals = attribution.namesOthers() ? new ExternalHolders(attribution) : null;
        meter.externals(externals);
        LocalDate today = AccountingStore.dayOf(clock.instant());
        List<LocalDate> days = writer.store().days();
        this.newestAtOpen = days.isEmpty() ? null : days.get(days.size() - 1);
        AccountingStore.Recovered r = writer.store().recover(today.minusDays(settings.retention().toDays()), today);
        meter.resume(r.tails());
        if (externals != null) {
            externals.resume(r.tails().values());
        }
        r.tails().values().forEach(t -> idle.judgedUpTo(t.to())); // a first sweep behind them is a step back
        // and behind the latest sweep the markers say was judged: with no allocation live there is no tail to say it
        // (review50)
        r.judged().ifPresent(idle::judgedByMarkers);
        // the idle policy continues each stretch the store has, as of its last interval (review36: a sampler
        // restarted every few minutes started every idle clock over and never warned)
        IdleStatus.stretches(writer.store(), clock.instant()).forEach((id, st) -> {
            Interval tail = r.tails().get(id);
            if (tail != null && tail.to().equals(st.tail())) {
                idle.resume(id, st);
                meter.continuesIdle(id, st.asOf());
            }
        });
        // the latest sweep judged by the mark the last sampler left at every sweep, when it continues the markers
        // read: a kill loses no sweep judged since the last marker (review55: the clock stepped back while down, a
        // grant behind those sweeps was flagged sooner than by the policy that ran on). Applied after the stretches
        // resume: their counts pair with the markers, not with the mark
        writer.store().sweepMark().filter(m -> m.base().equals(r.judged())).ifPresent(m -> idle.judgedUpTo(
                m.judged()));
        if (!r.tails().isEmpty()) {
            LOG.info("accounting: continuing {} allocation(s) from {}", r.tails().size(), writer.store().directory());
        }
    }

    /**
     * Opens the node's sampler over a store, unless another process is the sampler.
     *
     * @param store       the node's store
     * @param settings    {@code gpu.accounting} and {@code gpu.idle}
     * @param inventory   the node's inventory (per-process usage of shared GPUs)
     * @param attribution maps processes to allocations (null: {@link AllocationAttribution#host()})
     * @param effects     carries out the idle policy
     * @param clock       the sweeps' clock
     * @return the sampler, or empty when another process holds the store's sampler lock
     * @throws GpuConfigException when the settings name an HPC job-mapping directory that cannot be
     *                                             used (a link, writable by others, owned by another user)
     */
    public static Optional<AccountingSampler> open(AccountingStore store, AccountingSettings settings,
            GpuInventory inventory, ProcessAttribution attribution, IdleEffects effects, Clock clock) {
        Objects.requireNonNull(settings, "settings");
        Objects.requireNonNull(inventory, "inventory");
        Objects.requireNonNull(effects, "effects");
        Objects.requireNonNull(clock, "clock");
        Optional<AccountingStore.Writer> w = store.openWriter();
        if (w.isEmpty()) {
            LOG.info("accounting: another process is the node's sampler ({} is locked)",
                    store.directory().resolve(AccountingStore.LOCK));
            return Optional.empty();
        }
        try {
            return Optional.of(new AccountingSampler(w.get(), settings, inventory,
                    attribution != null ? attribution : AllocationAttribution.host(), effects, clock));
        } catch (RuntimeException e) {
            w.get().close();
            throw e;
        }
    }

    /**
     * @param l gets every interval as it is written (after the store has it): per-owner counters follow the store
     */
    public void addIntervalListener(Consumer<Interval> l) {
        intervalListeners.add(Objects.requireNonNull(l, "listener"));
    }

    /** Records queued by one caller; {@code done} and {@code error} are written and read under {@link #io}. */
    private static final class Ticket {
        final List<? extends AccountingRecord> records;
        boolean done;
        RuntimeException error;

        Ticket(List<? extends AccountingRecord> records) {
            this.records = records;
        }
    }

    /** Writes records now (queued behind what others queued) and returns once they are forced. */
    private void write(List<? extends AccountingRecord> records) {
        awaitForced(enqueue(records));
    }

    /** Queues records for the next batch; callers hold this sampler's monitor, so the queue keeps the meter's order. */
    private Ticket enqueue(List<? extends AccountingRecord> records) {
        Ticket t = new Ticket(records);
        synchronized (queue) {
            queue.add(t);
        }
        return t;
    }

    /**
     * Returns once the batch that holds {@code t} was forced (group commit): the thread that takes the store first
     * writes everything queued, its own records and those of the threads that queued meanwhile, with one force; they
     * find theirs done when they get the store. An empty ticket still retries what a failed append left.
     *
     * @throws RuntimeException the append's failure, when the batch that held {@code t} could not be written (its
     *                          records stay queued for the next one)
     */
    private void awaitForced(Ticket t) {
        io.lock();
        try {
            if (!t.done) {
                commitQueued();
            }
            if (t.error != null) {
                throw t.error;
            }
        } finally {
            io.unlock();
        }
    }

    /**
     * Appends every queued record, with any a failed append left behind first, and forces them once (caller holds
     * {@link #io}): a disk that was full or failing loses no interval the meter already closed (kept in memory up to
     * {@value #MAX_PENDING} records, the oldest dropped past that, with a warning), and they are written, in order,
     * once the store takes writes again.
     */
    private void commitQueued() {
        List<Ticket> tickets;
        synchronized (queue) {
            tickets = new ArrayList<>(queue);
            queue.clear();
        }
        List<AccountingRecord> batch = new ArrayList<>(pending);
        for (Ticket t : tickets) {
            batch.addAll(t.records);
        }
        try {
            writer.append(batch);
            pending.clear();
            retry = false;
        } catch (RuntimeException e) {
            pending.clear();
            int drop = Math.max(0, batch.size() - MAX_PENDING);
            if (drop > 0) {
                LOG.warn("accounting: {} records dropped: the store has refused writes for too long", drop);
            }
            pending.addAll(batch.subList(drop, batch.size()));
            retry = !pending.isEmpty();
            for (Ticket t : tickets) {
                t.error = e;
                t.done = true;
            }
            return;
        }
        for (Ticket t : tickets) {
            t.done = true;
        }
        for (AccountingRecord r : batch) {
            if (r instanceof Interval iv) {
                for (Consumer<Interval> l : intervalListeners) {
                    try {
                        l.accept(iv);
                    } catch (RuntimeException e) {
                        LOG.warn("accounting: interval listener {} failed: {}", l, e.toString());
                    }
                }
            }
        }
    }

    /** @return the store written */
    public AccountingStore store() {
        return writer.store();
    }

    /** @return the idle policy's state */
    public IdleWatch idleWatch() {
        return idle;
    }

    /** @return when each live allocation that is idle now went idle */
    public synchronized Map<String, Instant> idleSince() {
        return Map.copyOf(meter.idleSince());
    }

    /**
     * One sweep: credits it, writes what closed (and a checkpoint when due), then runs the idle policy.
     *
     * @param sample the sweep ({@link GpuInventory#sample()}, the one the host's other consumers got), taken before
     *               {@code live} is read: a release the list misses then comes at or after the sweep's time and its
     *               record is exact; a sample taken after a release its list still showed, on a checkpoint sweep,
     *               records the allocation up to the sweep (docs/ACCOUNTING.md, "Writes"; review28)
     * @param live   the allocations live at the sweep (the scheduler's, caught up with the node ledger)
     * @return the idle policy's steps taken at this sweep
     */
    public List<IdleAction> sweep(GpuSample sample, List<Allocation> live) {
        List<IdleAction> steps;
        synchronized (this) {
            if (closed) {
                return List.of();
            }
            Instant now = sample.takenAt();
            // the GPUs pods and Slurm jobs use without an allocation, when the attribution names them: metered as
            // holders, never judged by the policy (the scheduler's live list alone goes to it)
            List<Allocation> policyLive = live;
            Function<GpuDevice, Optional<ProcessUsageSample>> usage = processUsage;
            boolean jumped = meter.jumped(now);
            // not at a sweep the clock jumped ahead for: a pod or job first seen there would be tracked from that
            // time, and credited nothing once the clock came back until it passed it again (review64)
            if (externals != null && !jumped) {
                usage = onePerSweep(processUsage);
                List<Allocation> ext = externals.sweep(now, inventory.devices(), live, usage);
                if (!ext.isEmpty()) {
                    List<Allocation> all = new ArrayList<>(live.size() + ext.size());
                    all.addAll(live);
                    all.addAll(ext);
                    live = all;
                }
            }
            if (jumped) {
                LOG.warn("accounting: the clock is {} ahead of the previous sweep ({} to {}): nothing is credited,"
                        + " written or pruned at this sweep; if the clock stays, the time is recorded as not sampled",
                        Duration.ofMillis(now.toEpochMilli() - lastSweepMillis), Instant.ofEpochMilli(
                                lastSweepMillis),
                        now);
                meter.skip(now, sample, live);
                lastSweepMillis = now.toEpochMilli();
                syncJobMapping(policyLive);
                return List.of();
            }
            // a clock stepped back: the meter and the policy judge nothing until it passes their latest sweep, which a
            // checkpoint now makes the store's (a kill before the next one left the successor counting that time
            // again: review48)
            boolean steppedBack = lastSweepMillis >= 0 && now.toEpochMilli() < lastSweepMillis;
            long step = lastSweepMillis < 0 ? 0 : Math.max(0, now.toEpochMilli() - lastSweepMillis);
            lastSweepMillis = now.toEpochMilli();
            sinceCheckpoint += step;
            ranMillis += step;
            List<AccountingRecord> out = null; // most sweeps close nothing: no list is made, nothing is written
            if (first) {
                out = more(out, meter.endResumedNotLive(ids(live)));
                first = false;
            }
            if (!meter.allTrackedLive(live)) { // the common case: nothing vanished, no set of ids built
                out = more(out, meter.endVanished(ids(live)));
            }
            out = more(out, meter.observe(now, sample, live, usage));
            if (!granted.isEmpty()) {
                granted.keySet().removeAll(meter.tracked());
                granted.values().removeIf(e -> e.at().isBefore(now.minus(Duration.ofDays(1))));
            }
            boolean checkpoint = lastCheckpoint == null || steppedBack || sinceCheckpoint >= checkpointMillis
                    || System.nanoTime() - checkpointNanos >= checkpointNanosEvery;
            int markerAt = -1;
            List<String> open = null;
            if (checkpoint) {
                out = more(out, meter.checkpoint());
                if (out == null) {
                    out = new ArrayList<>(1);
                }
                markerAt = out.size(); // the marker goes here once the policy has judged this sweep (below)
                open = new ArrayList<>(meter.tracked());
                checkpointed(now);
            } else {
                // an allocation whose last record says idle and that reads busy now gets its interval at once: a
                // crash before the next checkpoint must not leave the store saying idle, for a restarted policy
                // would count the time before the busy spell (review42)
                out = more(out, meter.turnedBusy());
            }
            steps = idle.evaluate(now, policyLive, meter.idleSince(), meter.unmeasured());
            if (checkpoint) {
                // the latest sweep judged, this one unless the clock is behind one judged before: the mark a
                // successor's first sweep must pass, as this policy's next one must (reviews 50, 52)
                out.add(markerAt, new Checkpoint(now, open, idle.judged()));
            }
            out = more(out, steps);
            if (checkpoint) {
                out = more(out, idle.counts()); // after this sweep's step: a restart continues from it exactly
            }
            if (out != null || retry) { // a sweep with nothing to write still retries what a failed append left
                write(out != null ? out : List.of());
            }
            markSwept();
            housekeeping(now);
            syncJobMapping(policyLive);
        }
        return steps;
    }

    /** @return {@code usage}, each GPU's read once (the external holders' pass and the meter read the same) */
    private static Function<GpuDevice, Optional<ProcessUsageSample>> onePerSweep(
            Function<GpuDevice, Optional<ProcessUsageSample>> usage) {
        Map<Integer, Optional<ProcessUsageSample>> read = new HashMap<>();
        return d -> read.computeIfAbsent(d.index(), i -> usage.apply(d));
    }

    /** @return {@code out} with {@code records} added, made when it is null and there are some */
    private static List<AccountingRecord> more(List<AccountingRecord> out, List<? extends AccountingRecord> records) {
        if (records.isEmpty()) {
            return out;
        }
        if (out == null) {
            out = new ArrayList<>(records.size() + 1);
        }
        out.addAll(records);
        return out;
    }

    private static Set<String> ids(List<Allocation> live) {
        Set<String> ids = new HashSet<>();
        live.forEach(a -> ids.add(a.id()));
        return ids;
    }

    /** Brings dcgm-exporter's job-mapping files in step with the live allocations; a failure is logged, once. */
    private void syncJobMapping(List<Allocation> live) {
        if (jobMapping == null) {
            return;
        }
        try {
            jobMapping.sync(live);
            if (jobMappingError != null) {
                LOG.info("accounting: the HPC job-mapping directory {} is written again", jobMapping.directory());
                jobMappingError = null;
            }
        } catch (RuntimeException e) {
            if (!String.valueOf(e.getMessage()).equals(jobMappingError)) {
                LOG.warn("accounting: cannot write the HPC job-mapping directory: {}", e.getMessage());
            }
            jobMappingError = String.valueOf(e.getMessage());
        }
    }

    /** Ends allocations as the scheduler releases them (this process's releases and other processes', caught up). */
    @Override
    public void onEvent(AllocationEvent e) {
        Ticket ticket = end(e);
        if (ticket != null) {
            awaitForced(ticket); // outside the monitor: releases of other threads queue meanwhile and share this force
        }
    }

    /**
     * The events of one transaction: every ended allocation's last interval is queued first, then one force covers
     * them all (not one each); returns once they are on disk, as {@link #onEvent} does for one.
     */
    @Override
    public void onEvents(List<AllocationEvent> events) {
        List<Ticket> tickets = new ArrayList<>();
        for (AllocationEvent e : events) {
            Ticket t = end(e);
            if (t != null) {
                tickets.add(t);
            }
        }
        for (Ticket t : tickets) {
            awaitForced(t); // the first forces all of them; the others find theirs done
        }
    }

    /**
     * Tells this sampler the allocations live when it began to listen (the ledger's: call it right after adding it as
     * the scheduler's listener), so that one granted while no sampler ran and released before this sampler's first
     * sweep is still recorded from its grant, not sampled (review25); one the store already has is continued from
     * its records, as at a sweep, and is not kept as a grant (a release heard after the first sweep ended it must not
     * record it again from its grant; review30).
     */
    public synchronized void knownLive(List<Allocation> live) {
        if (closed) {
            return;
        }
        for (Allocation a : live) {
            AllocationEvent released = unheard.remove(a.id());
            if (released != null) {
                // released after this sampler began to listen but before it was told the grant: recorded from the
                // grant to the release, not sampled, as one released before the first sweep (review33)
                enqueue(UsageMeter.unsampled(a.id(), a.owner(), a.request().jobId(), a.devices(), a.createdAt(),
                        released.at(), released.type() == AllocationEvent.Type.RECLAIMED ? "RECLAIMED" : "RELEASED"));
                continue;
            }
            if (!meter.knows(a.id()) && !granted.containsKey(a.id())) {
                granted.put(a.id(), new AllocationEvent(AllocationEvent.Type.ALLOCATED, a.createdAt(),
                        Optional.of(a.id()), a.owner(), a.request().jobId(), a.devices().stream().map(
                                GpuDevice::uuid).toList(),
                        Optional.empty(), "live when the sampler began"));
            }
        }
        unheard.clear();
        toldLive = true;
    }

    /** @return the ticket of the records an event ends (to await), or null when it ends none */
    private Ticket end(AllocationEvent e) {
        if (e.allocationId().isEmpty()) {
            return null;
        }
        if (e.type() == AllocationEvent.Type.ALLOCATED) {
            synchronized (this) {
                // a grant heard after the meter tracked, ended or resumed the allocation (delivered late) is not one
                // no sweep has seen: its release must not record it again from its grant (review30)
                if (!closed && !meter.knows(e.allocationId().get())) {
                    granted.put(e.allocationId().get(), e);
                }
            }
            return null;
        }
        String cause = switch (e.type()) {
            case RELEASED -> "RELEASED";
            case RECLAIMED -> "RECLAIMED";
            default -> null;
        };
        if (cause == null) {
            return null;
        }
        synchronized (this) {
            if (closed) {
                return null;
            }
            String id = e.allocationId().get();
            boolean knownBefore = meter.knows(id);
            boolean endedBefore = meter.ended(id); // its record is written: a late release adds nothing (review30)
            List<Interval> last = meter.end(id, e.at(), cause);
            AllocationEvent grant = granted.remove(id);
            if (last.isEmpty() && grant != null && !endedBefore) {
                List<GpuDevice> devices = new ArrayList<>();
                for (String uuid : grant.deviceUuids()) {
                    inventory.devices().stream().filter(d -> d.uuid().equals(uuid)).findFirst()
                            .ifPresent(devices::add);
                }
                last = UsageMeter.unsampled(id, grant.owner(), grant.jobId(), devices, grant.at(), e.at(), cause);
            }
            if (last.isEmpty() && grant == null && !knownBefore && !toldLive) {
                unheard.put(id, e); // its grant may come with knownLive: recorded then (review33)
                if (unheard.size() > UNHEARD_MAX) {
                    unheard.remove(unheard.keySet().iterator().next());
                }
            }
            if (last.isEmpty()) {
                return null;
            }
            return enqueue(last);
        }
    }

    /** Writes every open interval now (a checkpoint), e.g. before a planned stop. */
    public synchronized void checkpoint() {
        if (closed) {
            return;
        }
        List<AccountingRecord> out = new ArrayList<>(meter.checkpoint());
        Instant now = clock.instant();
        out.add(new Checkpoint(now, new ArrayList<>(meter.tracked()), idle.judged()));
        write(out);
        markSwept();
        checkpointed(now);
    }

    /** Leaves the latest sweep judged in the store's sweep mark (after the batch that holds any marker is written). */
    private void markSwept() {
        Optional<Instant> judged = idle.judged();
        if (judged.isPresent() && !writer.mark(judged.get()) && !markWarned) {
            markWarned = true;
            LOG.warn("accounting: cannot write the sweep mark {} (a kill then loses the sweeps judged since the last"
                    + " checkpoint)", writer.store().directory().resolve(AccountingStore.MARK));
        }
    }

    /**
     * Checkpoints are keyed on elapsed time, not on the wall clock: the sweeps' own steps (a step back adds nothing, so
     * the next checkpoint still comes one interval of sweeps later) and, beside them, System.nanoTime.
     */
    private void checkpointed(Instant at) {
        lastCheckpoint = at;
        sinceCheckpoint = 0;
        checkpointNanos = System.nanoTime();
    }

    private void housekeeping(Instant now) {
        long epochDay = Math.floorDiv(now.toEpochMilli(), 86_400_000L);
        if (epochDay == lastHousekeepingDay) {
            return;
        }
        lastHousekeepingDay = epochDay;
        LocalDate today = AccountingStore.dayOf(now);
        if (newestAtOpen != null) {
            // by the data's own days: no further than the store's newest day when this sampler started plus the time
            // it has swept since, so a clock that is wrong (booted into the future, stepped ahead) cannot age out days
            // the node did not live through
            LocalDate bound = newestAtOpen.plusDays(1 + ranMillis / 86_400_000L);
            if (bound.isBefore(today)) {
                if (!bound.equals(clockWarnedFor)) {
                    LOG.warn("accounting: the clock says {}, but the store's newest day was {} when this sampler"
                            + " started {} ago: compaction and retention count from {}", today, newestAtOpen,
                            Duration.ofMillis(ranMillis), bound);
                    clockWarnedFor = bound;
                }
                today = bound;
            }
        }
        io.lock();
        try {
            LocalDate oldest = today.minusDays(settings.retention().toDays());
            writer.retain(oldest);
            LocalDate compactBefore = today.minusDays(settings.compactAfter().toDays());
            for (LocalDate d : writer.store().days()) {
                if (d.isBefore(compactBefore) && !writer.store().hasSummary(d)) {
                    writer.compact(d);
                }
            }
        } catch (RuntimeException e) {
            LOG.warn("accounting: compaction of {} failed: {}", writer.store().directory(), e.toString());
        } finally {
            io.unlock();
        }
    }

    /** Writes a last checkpoint (allocations stay open: the next sampler continues them) and releases the lock. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        try {
            List<AccountingRecord> out = new ArrayList<>(meter.checkpoint());
            Instant now = clock.instant();
            out.add(new Checkpoint(now, new ArrayList<>(meter.tracked()), idle.judged()));
            // dated by the last sweep the policy judged, as the intervals they go with end: a clock stepped back since
            // must not date them before those (review43), nor one stepped ahead after all the next sampler's
            // (reviews 44, 45)
            out.addAll(idle.counts());
            write(out);
            markSwept();
        } catch (RuntimeException e) {
            LOG.warn("accounting: last checkpoint failed: {}", e.toString());
        } finally {
            closed = true;
            io.lock();
            try {
                writer.close();
            } finally {
                io.unlock();
            }
        }
    }
}
