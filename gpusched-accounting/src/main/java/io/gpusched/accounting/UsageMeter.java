package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuSample;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.SharingMode;
import io.gpusched.core.UsageOwner;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * Turns sweeps of a node's GPUs into per-allocation usage: pure Java, driven by the times it is given.
 *
 * <p>Each {@link #observe} credits the span since the previous sweep (or since the grant, for an allocation granted
 * within it) to every live allocation, device by device, with the values of this sweep (what a driver reports at a
 * time is what the device did up to it):
 * <ul>
 *   <li>a GPU held exclusively by one allocation: the device's utilization, memory and energy;</li>
 *   <li>a GPU several allocations share: each process the backend lists is charged to its allocation by the
 *       {@link ProcessAttribution} (utilization and memory summed per allocation, never the device's figure copied to
 *       each); the device's energy is split by each allocation's share of the processes' SM utilization (estimated),
 *       equally when none was busy or utilization is not measured per process (said in a note); a process no rule
 *       ties to a holder is charged to no one, and while such processes are busy no holder of the GPU is judged (or
 *       counted) idle: they may be its;</li>
 *   <li>a MIG partition: utilization "not measured" with the backend's reason; energy not measured (a partition has
 *       no counter of its own, and the GPU's counter covers every partition).</li>
 * </ul>
 * Energy over a span is the driver counter's delta where the device has one (exact), else power times time
 * (estimated, marked). Spans are cut at UTC midnight so every interval lies within one day. A time nothing sampled
 * (a sampler that was not running) becomes a {@code gap} interval: held time, no utilization, and energy only where the
 * counter bridges it on an exclusively held GPU.
 *
 * <p>Not thread-safe: the sampler calls it from one thread.
 *
 * <p>Why it is about 600 lines: one sweep's crediting (per device, exclusive or shared, energy by counter or power,
 * day cuts, gaps, the end of an allocation) is one state machine over the same per-allocation tracks.
 */
final class UsageMeter {
    static final String NOT_SAMPLED = "not sampled: no sampler ran over this time (the node's sampler was stopped or"
            + " had not started)";
    static final String MIG_ENERGY = "energy not measured: a MIG partition has no energy counter of its own (the GPU's"
            + " counter covers every partition)";
    static final String NO_PROCESSES = "utilization not measured: a shared GPU whose backend cannot list its processes"
            + " (the device's figure is never copied to each holder)";
    static final String UNATTRIBUTED_BUSY = "not judged idle: processes no rule ties to a holder were busy on this"
            + " shared GPU, or it read busy while no listed process did (the work may be this allocation's; unknown is"
            + " never idle)";
    /**
     * The most power one GPU is believed to draw, in watts (the largest today, a Blackwell superchip's two GPUs, stay
     * under 3 kW): an energy counter that moved faster over a span is taken as a glitch of the read (or a reset), not
     * a measurement, and the span is estimated from power instead (review23: one bad read charged 277,777 kWh).
     */
    static final long MAX_PLAUSIBLE_WATTS = 10_000;

    /**
     * How long whom a process on a shared GPU is charged to is kept before its incarnation (start time) is read again:
     * a pid freed and taken by another process between two sweeps (it never leaves the list) is charged to its new
     * process from the next sweep this long after the last check. Reading {@code /proc/<pid>/stat} every sweep for
     * every process of every shared GPU would cost more than the rest of the sweep (about 17 us a process).
     */
    static final long REVALIDATE_MILLIS = 10_000;

    /**
     * Percentage points by which a shared GPU's own utilization must exceed the sum of its listed processes' for the
     * rest to count as work no holder can be told from (never idle).
     */
    static final double UNSEEN_MARGIN = 25;

    /**
     * The one allowance for energy beyond {@link #MAX_PLAUSIBLE_WATTS} x a span by the clock, used by the meter (a
     * counter's delta over a sweep) and by the reader ({@link RecordCodec#plausibleEnergy}) alike, so the meter never
     * writes energy the reader refuses: the wall clock may have stepped back between two reads (the span by the clock
     * then shorter than the time that passed; review25) by up to this much and the counter's delta stays exact. A
     * larger step back makes that sweep's energy an estimate (power x time); a delta above 10 kW x (span + this) is
     * taken as a glitch of the read (review28).
     */
    static final long ENERGY_SLACK_MILLIS = 60_000L;

    /**
     * @return whether a counter moved forward from {@code before} to {@code after} no more than a GPU can draw over the
     *         span and {@link #ENERGY_SLACK_MILLIS} besides
     */
    private static boolean plausible(OptionalLong before, OptionalLong after, long millis) {
        long delta = after.getAsLong() - before.getAsLong();
        // W x ms = mJ; a delta that overflowed is negative
        return delta >= 0 && after.getAsLong() >= before.getAsLong()
                && delta / MAX_PLAUSIBLE_WATTS <= Math.max(0, millis) + ENERGY_SLACK_MILLIS;
    }

    static final String NO_ENERGY = "energy not measured: no energy counter and no power reading";
    static final String ESTIMATED_POWER = "energy estimated: no energy counter, power samples x time";
    static final String SPLIT_BY_UTIL = "energy estimated: a shared GPU's energy split by each holder's share of SM"
            + " utilization (no driver measures energy per process)";
    static final String SPLIT_EQUALLY = "energy estimated: a shared GPU's energy split equally among its holders (no"
            + " process was busy, or utilization is not measured per process)";

    private final double idleThreshold;
    private final ProcessAttribution attribution;
    private final Map<String, Track> tracks = new LinkedHashMap<>();
    private final Map<String, Interval> resumeFrom = new HashMap<>();
    /** the resumed allocations whose idle stretch the store continues, until their first sweep */
    private final Map<String, Long> resumedIdle = new HashMap<>();
    /** each device's energy counter at the last sweep, by index (indices past {@link #DENSE_INDICES} in a map) */
    private OptionalLong[] lastCounter = new OptionalLong[0];
    private final Map<Integer, OptionalLong> lastCounterBeyond = new HashMap<>();
    /**
     * Per shared device, per pid: whom the attribution charged it to, kept while the pid stays in the device's process
     * list, the device's holders stay the same and the process is the same one ({@link
     * ProcessAttribution#incarnation}, its start time, read every {@link #REVALIDATE_MILLIS}: a pid freed and taken
     * by another process between two sweeps stays listed, review23), so {@code /proc} is not read every sweep.
     */
    private final Map<Integer, Map<Integer, Attributed>> attributed = new HashMap<>();

    private static final class Attributed {
        final Set<String> holders;
        final Optional<UsageOwner> owner;
        /** the process's {@link ProcessAttribution#incarnation} when it was charged; empty: the source cannot tell */
        final OptionalLong incarnation;
        /** the sweep's time (epoch ms) the process was last known to be the one charged */
        long checkedAt;
        /** the last listing ({@link #listing}) that showed the pid */
        long listed;

        Attributed(Set<String> holders, Optional<UsageOwner> owner, OptionalLong incarnation, long checkedAt,
                long listed) {
            this.holders = holders;
            this.owner = owner;
            this.incarnation = incarnation;
            this.checkedAt = checkedAt;
            this.listed = listed;
        }
    }
    /** allocation id to when it went idle, for those idle at the last sweep (kept up to date, read without a copy) */
    private final Map<String, Instant> idle = new HashMap<>();
    private final Map<String, Instant> idleView = Collections.unmodifiableMap(idle);
    /** the live allocations the last sweep measured nothing for: their time up to it was a gap (review34) */
    private final Set<String> unmeasured = new HashSet<>();
    private final Set<String> unmeasuredView = Collections.unmodifiableSet(unmeasured);
    /** the tracks whose last record says idle that this sweep read busy ({@link #turnedBusy}) */
    private final List<Track> turned = new ArrayList<>();
    private Long lastTick;
    /** the holders of each device at the last sweep (see {@link Layout}) */
    private Layout layout;
    /** the sweep being credited: its metrics by device index (indices past {@link #DENSE_INDICES} in a map) */
    private GpuMetrics[] metricsByIndex = new GpuMetrics[0];
    private final Map<Integer, GpuMetrics> metricsBeyond = new HashMap<>();
    private static final int DENSE_INDICES = 4096;
    /** counts sweeps of shared devices' process lists: which attributions a list still showed */
    private long listing;
    /** counts {@link #allTrackedLive} calls */
    private long liveChecks;
    /** counts tracks added and removed: a {@link Layout}'s cached tracks are valid while it stays the same */
    private long trackMods;
    private static final long NEVER = -1;
    /** the list of live allocations {@link #allTrackedLive} found the same as the layout's, for this sweep only */
    private List<Allocation> sameAsLayout;
    /**
     * Ids of allocations this meter ended (their records written), each with {@link #swept} at its end, kept for a day
     * of sweeps ({@link #ENDED_KEPT_MILLIS}): a sweep whose list of live allocations was read before a release (the
     * tick read it, then another thread released one) must not start that allocation's track again, from its grant (it
     * would be counted twice, then ended unobserved), and a grant or release heard after the meter ended the
     * allocation (delivered late, behind a slow listener) must not record it again ({@link AccountingSampler};
     * review30). No count caps them (a burst of releases between two sweeps cannot push one out; review28).
     * Allocation ids are never used again.
     */
    private final Map<String, Long> ended = new LinkedHashMap<>();
    /** sweep time this meter observed: the sum of its sweeps' steps forward (a jump or a step back adds nothing) */
    private long swept;
    /** how long (in {@link #swept} time) an ended allocation's id is kept */
    static final long ENDED_KEPT_MILLIS = Duration.ofDays(1).toMillis();

    /** @return whether this meter ended the allocation within the last day of sweeps */
    boolean ended(String id) {
        return ended.containsKey(id);
    }

    /**
     * @return whether this meter knows the allocation: tracked, ended within the last day of sweeps, or left open by
     *         the store ({@link #resume}): its events are this meter's to record, not a grant no sweep has seen
     */
    boolean knows(String id) {
        return tracks.containsKey(id) || ended.containsKey(id) || resumeFrom.containsKey(id);
    }

    /** At the end of a sweep: the ids ended more than a day of sweeps ago are forgotten. */
    private void rotateEnded() {
        for (Iterator<Map.Entry<String, Long>> it = ended.entrySet().iterator(); it.hasNext();) {
            if (swept - it.next().getValue() <= ENDED_KEPT_MILLIS) {
                break; // in the order they ended: the rest are younger
            }
            it.remove();
        }
    }

    /**
     * The longest span one sweep is credited with (the console's and the service's sweeps come every
     * {@code --interval}, 1 s by default): a sweep further than this after the previous one is a jump of the wall clock
     * (or a stalled host), not a sample of it ({@link #jumped}).
     */
    static final long MAX_SWEEP_MILLIS = 10 * 60_000L;

    /**
     * @param idleThreshold utilization (percent) at or below which a GPU counts as idle
     * @param attribution   maps processes on shared GPUs to allocations
     */
    /** the sampler's pass over the GPUs pods and Slurm jobs use, when it makes one */
    private ExternalHolders externals;

    /** Charges the processes of pods' and Slurm jobs' GPUs by the answers of that pass. */
    void externals(ExternalHolders e) {
        externals = e;
    }

    UsageMeter(double idleThreshold, ProcessAttribution attribution) {
        this.idleThreshold = idleThreshold;
        this.attribution = attribution;
    }

    /** One allocation's open interval and where its record stands. */
    private static final class Track {
        Allocation allocation;
        long from;
        long covered;
        boolean first;
        Long idleSince;
        /** whether its last record written says idle (an idle start): see {@link #turnedBusy} */
        boolean recordedIdle;
        /** per device of the allocation (in its order): its slot in the arrays below, one per device index (a
         *  device listed twice shares one slot, as a map by index would) */
        int[] slot;
        /** per slot: the open interval's figures (null: none yet), notes (null: none) and the energy counter at the
         *  last sweep (null: none); arrays, not maps by index: they are read and written every sweep */
        UsageFigures[] figures;
        Set<String>[] notes;
        OptionalLong[] counter;
        /**
         * per slot: whether the last sweep credited kept this pod or job on the GPU without a source's answer (its
         * record's {@link ExternalHolders#CARRIED} note says how the record ends, not what a sweep in it did: review63)
         */
        boolean[] carried;

        Track(Allocation a) {
            allocation = a;
            List<GpuDevice> ds = a.devices();
            slot = new int[ds.size()];
            Map<Integer, Integer> slots = new HashMap<>();
            for (int j = 0; j < slot.length; j++) {
                slot[j] = slots.computeIfAbsent(ds.get(j).index(), k -> slots.size());
            }
            figures = new UsageFigures[slots.size()];
            notes = newNotes(slots.size());
            counter = new OptionalLong[slots.size()];
            carried = new boolean[slots.size()];
        }

        @SuppressWarnings("unchecked")
        private static Set<String>[] newNotes(int n) {
            return (Set<String>[]) new Set<?>[n];
        }

        /** Takes the allocation as the scheduler lists it now: the same devices keep their figures (by index). */
        void update(Allocation a) {
            if (a == allocation || a.devices().equals(allocation.devices())) {
                allocation = a;
                return;
            }
            Track t = new Track(a);
            List<GpuDevice> was = allocation.devices();
            for (int j = 0; j < was.size(); j++) {
                for (int k = 0; k < t.slot.length; k++) {
                    if (a.devices().get(k).index() == was.get(j).index()) {
                        t.figures[t.slot[k]] = figures[slot[j]];
                        t.notes[t.slot[k]] = notes[slot[j]];
                        t.counter[t.slot[k]] = counter[slot[j]];
                        t.carried[t.slot[k]] = carried[slot[j]];
                    }
                }
            }
            allocation = a;
            slot = t.slot;
            figures = t.figures;
            notes = t.notes;
            counter = t.counter;
            carried = t.carried;
        }

        /** @return the figures of the open interval for the j-th device of the allocation */
        UsageFigures figures(int j) {
            UsageFigures f = figures[slot[j]];
            if (f == null) {
                f = new UsageFigures();
                figures[slot[j]] = f;
            }
            return f;
        }

        /** @return the energy counter at the last sweep for the j-th device, empty when none */
        OptionalLong counter(int j) {
            OptionalLong c = counter[slot[j]];
            return c == null ? OptionalLong.empty() : c;
        }
        boolean lastTickIdle;
        /** the last sweep before a gap, when the allocation was idle at it (a gap clears its idle start); else null */
        Long idleBeforeGap;
        /** the last {@link #allTrackedLive} call that found it live */
        long seenLive;
    }

    /** Continues allocations the store left open (their last intervals): nothing before them is counted again. */
    void resume(Map<String, Interval> tails) {
        resumeFrom.putAll(tails);
    }

    /**
     * Tells the meter that the allocation's idle stretch continues from the store (the policy resumed it): a first
     * sweep that cannot read its utilization keeps it idle from then, as a running meter keeps an idle start across
     * such sweeps (review45: the stretch was split in the store, not in the policy), provided that sweep comes within
     * {@link #MAX_SWEEP_MILLIS} of the stretch's last idle checkpoint {@code asOf} (after a longer gap the stretch is
     * over, and no sweep has read it idle since: review46).
     */
    void continuesIdle(String id, Instant asOf) {
        resumedIdle.put(id, asOf.toEpochMilli());
    }

    /** @return the allocations tracked (live as of the last sweep) */
    Set<String> tracked() {
        return tracks.keySet();
    }

    /** @return when each tracked allocation's GPUs went idle, for those idle at the last sweep */
    Map<String, Instant> idleSince() {
        return idleView;
    }

    /**
     * @return the live allocations the last sweep measured as neither idle nor busy: it credited nothing (the time up
     *         to it was recorded as a gap: the first sweep of this meter, or the first after the clock jumped ahead
     *         and came back: review34), or no GPU of it read busy while one could not be read (review36)
     */
    Set<String> unmeasured() {
        return unmeasuredView;
    }

    /** @return whether the allocation's GPUs were all measured and idle at the last sweep */
    boolean idleAtLastSweep(String id) {
        Track t = tracks.get(id);
        return t != null && t.lastTickIdle;
    }

    /**
     * @return whether a sweep at {@code now} is more than {@link #MAX_SWEEP_MILLIS} after the previous one: it must be
     *         {@link #skip skipped}, never credited
     */
    boolean jumped(Instant now) {
        return lastTick != null && now.toEpochMilli() - lastTick > MAX_SWEEP_MILLIS;
    }

    /**
     * Takes a sweep that {@link #jumped} without crediting anything: no allocation's time advances. When the next
     * sweep is not before it (the clock stays ahead), the time from each allocation's last credited sweep to this one
     * becomes a {@code gap} (held, said not sampled, energy where the counter bridges it); when the clock comes back
     * before it, only the time to that next sweep does: a span the clock jumped over and took back is never recorded.
     * Allocations first seen here are tracked from their grants.
     */
    void skip(Instant now, GpuSample sample, List<Allocation> live) {
        for (Allocation a : live) { // tracked from their grants, so a checkpoint records them; nothing credited
            if (!tracks.containsKey(a.id()) && !ended(a.id())) {
                tracks.put(a.id(), start(a));
                trackMods++;
            }
        }
        for (GpuMetrics m : sample.metrics()) { // the counters at this sweep: the gap's end, the next span's start
            lastCounter(m.index(), m.energyMillijoules());
        }
        lastTick = now.toEpochMilli();
        rotateEnded();
    }

    /**
     * Credits one sweep.
     *
     * @param now    when the sweep was taken
     * @param sample the sweep's metrics
     * @param live   the allocations live now
     * @param usage  per-process usage of a device (called only for GPUs more than one allocation may use)
     * @return intervals closed by this sweep (gaps, and the part before a UTC midnight it crossed)
     */
    List<Interval> observe(Instant now, GpuSample sample, List<Allocation> live,
            Function<GpuDevice, Optional<ProcessUsageSample>> usage) {
        long t = now.toEpochMilli();
        Long prev = lastTick != null && lastTick <= t ? lastTick : null;
        boolean cameBack = lastTick != null && lastTick > t; // after a sweep skipped as a jump the clock took back
        List<Interval> out = new ArrayList<>();
        if (!unmeasured.isEmpty()) {
            unmeasured.clear();
        }
        if (!turned.isEmpty()) {
            turned.clear();
        }
        Layout layout = layout(live);
        Track busyAt = null; // the track a gapped sweep read busy, for its record once its counters are read
        indexMetrics(sample.metrics());
        // per device: energy over [prev, t), and per-allocation shares on shared GPUs (the layout's, reused)
        DeviceSweep[] sweeps = layout.sweeps;
        for (int i = 0; i < sweeps.length; i++) {
            Holding h = layout.holdings[i];
            sweep(sweeps[i], h, metricsAt(h.device.index()), prev, t, usage);
        }
        // each live allocation's track: the layout's, while no track was added or removed since it was kept
        Track[] trackAt = layout.tracksAt == trackMods ? layout.tracks : null;
        int k = 0;
        for (Allocation a : live) {
            int[] positions = layout.positions[k];
            int[] slots = layout.slots[k];
            Track tr = trackAt != null ? trackAt[k] : tracks.get(a.id());
            if (tr == null && ended(a.id())) { // released since the list was read: its record is written
                layout.tracks[k++] = null;
                unmeasured.add(a.id()); // neither idle nor busy: not "busy again" to the policy (review38)
                continue;
            }
            if (tr == null) {
                tr = start(a);
                tracks.put(a.id(), tr);
                trackMods++;
            }
            layout.tracks[k++] = tr;
            if (tr.covered > tr.from && lostADevice(tr.allocation, a)) {
                // a pod or job that left one of its GPUs (ExternalHolders): what that GPU's figures hold up to the
                // last sweep is written first, for the track goes on without it (review59)
                out.add(close(tr, tr.covered, Optional.empty(), false));
            }
            tr.update(a);
            long sampledFrom = prev != null ? prev : t;
            boolean gapped = tr.covered < sampledFrom;
            if (gapped) {
                gap(tr, tr.covered, sampledFrom, sweeps, slots, positions, prev == null, out);
            }
            if (tr.covered < t) {
                credit(tr, tr.covered, t, sweeps, slots, positions, out);
            } else {
                // nothing credited. The time up to it was a gap: neither idle nor busy to the policy (review34), yet a
                // GPU of it that reads busy now is busy again, as at any sweep (a sampler's first sweep after a
                // restart: the busy reading was lost and the stretch continued); one that reads idle is idle as of
                // this sweep, the idle start the next idle step would give it, kept across a sweep that cannot read
                // it (review43: the stretch was split in the store, not in the policy). Or its record reaches this
                // sweep or past it (a sampler restarted on a clock stepped back behind the store's last checkpoint
                // credits nothing until the clock passes it, and was taken for busy again: review42)
                int reading = gapped ? reading(sweeps, slots, positions) : NEITHER;
                if (reading != BUSY) {
                    unmeasured.add(a.id());
                } else {
                    busyAt = tr; // a record of its own that says busy at this sweep, below
                }
                // a stretch kept across the gap (the policy keeps it): resumed from the store by a restarted sampler,
                // or a running one's across a jump the clock took back (review50: the store's stretch began after it)
                Long asOf = gapped && reading == NEITHER ? (cameBack ? tr.idleBeforeGap : resumedIdle.get(a.id()))
                        : null;
                if (reading == IDLE || asOf != null && t - asOf <= MAX_SWEEP_MILLIS) {
                    tr.idleSince = t;
                }
            }
            if (!resumedIdle.isEmpty()) {
                resumedIdle.remove(a.id());
            }
            List<GpuDevice> ds = a.devices();
            for (int j = 0; j < ds.size(); j++) {
                GpuMetrics m = metricsAt(ds.get(j).index());
                tr.counter[tr.slot[j]] = m == null ? OptionalLong.empty() : m.energyMillijoules();
            }
            if (busyAt == tr) {
                // no time, no figures, this sweep's counters: the store would otherwise continue the stretch across
                // the gap as if no sweep had read it busy (review44), and a next sampler bridges from these counters,
                // not the ones before the gap (review45: at a midnight it was the tail, and the gap's energy counted
                // twice)
                out.add(close(tr, t, Optional.empty(), false));
                busyAt = null;
            }
        }
        for (GpuMetrics m : sample.metrics()) { // after the gaps: they read the counters at the previous sweep
            lastCounter(m.index(), m.energyMillijoules());
        }
        layout.tracksAt = trackMods;
        sameAsLayout = null;
        // every live allocation is tracked now; when nothing else is, allTrackedLive knows it until tracks or the
        // live allocations change
        layout.allTrackedAt = tracks.size() == layout.distinctIds ? trackMods : NEVER;
        if (lastTick != null && t > lastTick) {
            swept += t - lastTick;
        }
        lastTick = t;
        rotateEnded();
        return out;
    }

    /** @return whether {@code now} holds fewer of the devices {@code was} held (by index) */
    private static boolean lostADevice(Allocation was, Allocation now) {
        if (was == now || was.devices().equals(now.devices())) {
            return false;
        }
        Set<Integer> kept = new HashSet<>();
        now.devices().forEach(d -> kept.add(d.index()));
        for (GpuDevice d : was.devices()) {
            if (!kept.contains(d.index())) {
                return true;
            }
        }
        return false;
    }

    /**
     * Who holds which device, for the live allocations of a sweep. Allocations are immutable, so while the scheduler
     * hands over the same allocations (the same objects, in the same order) the layout of the previous sweep is
     * reused: the per-device holder lists are not rebuilt every sweep.
     */
    private static final class Layout {
        /** the live allocations it was built from, compared by identity */
        final Allocation[] live;
        /** one per device index held, in index order */
        final Holding[] holdings;
        /** per live allocation (in the order of {@link #live}), per device of it: its holding's position */
        final int[][] slots;
        /** per live allocation, per device of it: its position among the holding's holders (the first with its id) */
        final int[][] positions;
        /** per holding: what the sweep being credited says about it (reset by each sweep) */
        final DeviceSweep[] sweeps;
        /** how many distinct ids {@link #live} holds */
        final int distinctIds;
        /** per live allocation: its track, valid while the meter's {@code trackMods} equals {@code tracksAt} */
        final Track[] tracks;
        long tracksAt = NEVER;
        /** the meter's {@code trackMods} at which every track was of an allocation in {@code live} ({@code NEVER}:
         *  not known) */
        long allTrackedAt = NEVER;

        Layout(List<Allocation> allocations) {
            live = allocations.toArray(new Allocation[0]);
            Map<Integer, List<Allocation>> holders = new TreeMap<>();
            Map<Integer, GpuDevice> devices = new HashMap<>();
            for (Allocation a : live) {
                for (GpuDevice d : a.devices()) {
                    holders.computeIfAbsent(d.index(), x -> new ArrayList<>()).add(a);
                    devices.put(d.index(), d); // the last listed, as a map by index keeps it
                }
            }
            holdings = new Holding[holders.size()];
            Map<Integer, Integer> position = new HashMap<>();
            int i = 0;
            for (Map.Entry<Integer, List<Allocation>> e : holders.entrySet()) {
                position.put(e.getKey(), i);
                holdings[i++] = new Holding(devices.get(e.getKey()), e.getValue());
            }
            slots = new int[live.length][];
            positions = new int[live.length][];
            for (int k = 0; k < live.length; k++) {
                List<GpuDevice> ds = live[k].devices();
                slots[k] = new int[ds.size()];
                positions[k] = new int[ds.size()];
                for (int j = 0; j < ds.size(); j++) {
                    slots[k][j] = position.get(ds.get(j).index());
                    positions[k][j] = holdings[slots[k][j]].position(live[k].id());
                }
            }
            sweeps = new DeviceSweep[holdings.length];
            for (int h = 0; h < holdings.length; h++) {
                sweeps[h] = new DeviceSweep(holdings[h].holders.size());
            }
            Set<String> ids = new HashSet<>();
            for (Allocation a : live) {
                ids.add(a.id());
            }
            distinctIds = ids.size();
            tracks = new Track[live.length];
        }

        boolean sameAs(List<Allocation> allocations) {
            if (allocations.size() != live.length) {
                return false;
            }
            int k = 0;
            for (Allocation a : allocations) {
                if (a != live[k++]) {
                    return false;
                }
            }
            return true;
        }
    }

    /** One device and the live allocations holding it. */
    private static final class Holding {
        final GpuDevice device;
        final List<Allocation> holders;
        /** the holders' ids (shared devices: whom a process was charged among, for {@link #attributed}) */
        final Set<String> holderIds;
        final boolean exclusive;
        /** whether pods or Slurm jobs hold it ({@link ExternalHolders}: never beside an allocation) */
        final boolean external;
        /** per holder: the first position of a holder with its id (the figures of an id are kept there) */
        final int[] canonical;

        Holding(GpuDevice device, List<Allocation> holders) {
            this.device = device;
            this.holders = List.copyOf(holders);
            this.exclusive = holders.size() == 1 && holders.get(0).sharing() == SharingMode.EXCLUSIVE;
            this.external = !holders.isEmpty() && ExternalHolders.isExternal(holders.get(0).id());
            Set<String> ids = new HashSet<>();
            holders.forEach(a -> ids.add(a.id()));
            this.holderIds = Collections.unmodifiableSet(ids);
            this.canonical = new int[holders.size()];
            for (int i = 0; i < canonical.length; i++) {
                canonical[i] = position(holders.get(i).id());
            }
        }

        /**
         * @return the position of the holder an owner is: an allocation holding this GPU, or, on a GPU that pods or
         *         Slurm jobs hold ({@link ExternalHolders}), the owner's track; -1 when none
         */
        int positionOf(UsageOwner o) {
            if (!external) {
                return o.kind() == UsageOwner.Kind.ALLOCATION ? position(o.id()) : -1;
            }
            String k = ExternalHolders.key(o);
            if (k == null) {
                return -1;
            }
            for (int i = 0; i < holders.size(); i++) {
                if (k.equals(ExternalHolders.keyOf(holders.get(i).id()))) {
                    return i;
                }
            }
            return -1;
        }

        /** @return the first position of a holder with this id, -1 when none */
        int position(String id) {
            for (int i = 0; i < holders.size(); i++) {
                if (holders.get(i).id().equals(id)) {
                    return i;
                }
            }
            return -1;
        }
    }

    private Layout layout(List<Allocation> live) {
        Layout l = layout;
        if (l == null || live != sameAsLayout && !l.sameAs(live)) {
            l = new Layout(live);
            layout = l;
        }
        return l;
    }

    /** Indexes a sweep's metrics by device index (the last one listed for an index wins, as a map by index keeps). */
    private void indexMetrics(List<GpuMetrics> metrics) {
        Arrays.fill(metricsByIndex, null);
        metricsBeyond.clear();
        for (GpuMetrics m : metrics) {
            int i = m.index();
            if (i >= 0 && i < DENSE_INDICES) {
                if (i >= metricsByIndex.length) {
                    metricsByIndex = Arrays.copyOf(metricsByIndex, Math.max(i + 1, 2 * metricsByIndex.length));
                }
                metricsByIndex[i] = m;
            } else {
                metricsBeyond.put(i, m);
            }
        }
    }

    private void lastCounter(int index, OptionalLong v) {
        if (index >= 0 && index < DENSE_INDICES) {
            if (index >= lastCounter.length) {
                lastCounter = Arrays.copyOf(lastCounter, Math.max(index + 1, 2 * lastCounter.length));
            }
            lastCounter[index] = v;
        } else {
            lastCounterBeyond.put(index, v);
        }
    }

    /** @return the energy counter of the device of this index at the last sweep, empty when none */
    private OptionalLong lastCounter(int index) {
        OptionalLong v = index >= 0 && index < DENSE_INDICES ? (index < lastCounter.length ? lastCounter[index] : null)
                : lastCounterBeyond.get(index);
        return v == null ? OptionalLong.empty() : v;
    }

    /** @return the metrics of the device of this index at the sweep being credited, null when it read none */
    private GpuMetrics metricsAt(int index) {
        if (index >= 0 && index < DENSE_INDICES) {
            return index < metricsByIndex.length ? metricsByIndex[index] : null;
        }
        return metricsBeyond.get(index);
    }

    private Track start(Allocation a) {
        Track tr = new Track(a);
        Interval tail = resumeFrom.remove(a.id());
        if (tail != null) {
            tr.from = tail.to().toEpochMilli();
            tr.covered = tr.from;
            tr.first = false;
            tr.idleSince = tail.idleSince().map(Instant::toEpochMilli).orElse(null);
            // the store says idle where the tail has an idle start, and may where it is a gap (a stretch continues
            // across one): a busy reading then gets its interval at once (found by a kill test's wider search)
            tr.recordedIdle = tr.idleSince != null || tail.gap();
            for (DeviceUsage d : tail.devices()) { // the last listed for an index wins
                List<GpuDevice> ds = a.devices();
                for (int j = 0; j < ds.size(); j++) {
                    if (ds.get(j).index() == d.index()) {
                        tr.counter[tr.slot[j]] = d.counterAtEnd();
                    }
                }
            }
        } else {
            tr.from = a.createdAt().toEpochMilli();
            tr.covered = tr.from;
            tr.first = true;
        }
        return tr;
    }

    /**
     * What one sweep says about one device, and how it is shared among its holders: figures per holder position (the
     * first position of each id, {@link Holding#canonical}), in arrays reused from sweep to sweep.
     */
    private static final class DeviceSweep {
        boolean sampled;
        boolean mig;
        /** held by one allocation in exclusive mode and sampled: its figures are the device's */
        boolean exclusive;
        /** energy over [prev, t), mJ; -1: none */
        double energy;
        boolean energyExact;
        String energyNote;
        /** per holder: utilization (percent) charged, where {@link #utilSet} (else not measured) */
        final double[] util;
        final boolean[] utilSet;
        /** per holder: memory (bytes), where {@link #memorySet} */
        final long[] memory;
        final boolean[] memorySet;
        /** per holder: its share of the device's energy, 0 to 1 */
        final double[] energyShare;
        /** per holder: the utilization of the processes charged to it (shared devices), where {@link #busySet} */
        final double[] busy;
        final boolean[] busySet;
        /** per holder: a pod or job kept on the GPU this sweep without a source's answer for it (ExternalHolders) */
        final boolean[] carried;
        String utilNote;
        String shareNote;
        /** processes no rule ties to anyone were busy above the idle threshold: no holder is judged idle on it */
        boolean unattributedBusy;
        long prev;
        long now;

        DeviceSweep(int holders) {
            util = new double[holders];
            utilSet = new boolean[holders];
            memory = new long[holders];
            memorySet = new boolean[holders];
            energyShare = new double[holders];
            busy = new double[holders];
            busySet = new boolean[holders];
            carried = new boolean[holders];
        }

        void reset() {
            sampled = false;
            mig = false;
            exclusive = false;
            energy = -1;
            energyExact = false;
            energyNote = null;
            Arrays.fill(utilSet, false);
            Arrays.fill(memorySet, false);
            Arrays.fill(energyShare, 0.0);
            Arrays.fill(busySet, false);
            Arrays.fill(carried, false);
            utilNote = null;
            shareNote = null;
            unattributedBusy = false;
        }
    }

    private void sweep(DeviceSweep s, Holding h, GpuMetrics m, Long prev, long t,
            Function<GpuDevice, Optional<ProcessUsageSample>> usage) {
        GpuDevice d = h.device;
        List<Allocation> hs = h.holders;
        s.reset();
        if (h.external && externals != null) {
            Set<String> kept = externals.carried(d.index());
            for (int i = 0; i < hs.size() && !kept.isEmpty(); i++) {
                s.carried[h.canonical[i]] |= kept.contains(ExternalHolders.keyOf(hs.get(i).id()));
            }
        }
        s.sampled = m != null;
        s.mig = d.parentUuid().isPresent();
        s.now = t;
        s.prev = prev == null ? t : prev;
        if (m == null) {
            return;
        }
        if (s.mig) {
            s.energyNote = MIG_ENERGY;
        } else if (prev != null && prev < t) {
            OptionalLong before = lastCounter(d.index());
            OptionalLong after = m.energyMillijoules();
            if (before.isPresent() && after.isPresent() && plausible(before, after, t - prev)) {
                s.energy = after.getAsLong() - before.getAsLong();
                s.energyExact = true;
            } else if (m.powerWatts().isPresent() && m.powerWatts().getAsDouble() >= 0
                    && m.powerWatts().getAsDouble() <= MAX_PLAUSIBLE_WATTS) { // a read of all ones is no power
                s.energy = m.powerWatts().getAsDouble() * (t - prev); // W x ms = mJ
                s.energyNote = ESTIMATED_POWER;
            } else {
                s.energyNote = NO_ENERGY;
            }
        }
        if (h.exclusive) {
            s.exclusive = true;
            double u = m.utilizationPercent().orElse(Double.NaN);
            if (u >= 0) { // a read past 100 % (a driver's glitch) counts as 100; NaN or negative as not measured
                s.util[0] = Math.min(100, u);
                s.utilSet[0] = true;
            } else {
                s.utilNote = "utilization not measured: " + usage.apply(d).flatMap(
                        ProcessUsageSample::utilizationUnmeasured).orElse(
                                s.mig
                                        ? "MIG partitions report no utilization"
                                        : "the backend reports none for this GPU");
            }
            if (m.memoryUsed().isPresent()) {
                s.memory[0] = m.memoryUsed().get().bytes();
                s.memorySet[0] = true;
            }
            s.energyShare[0] = 1.0;
            return;
        }
        Optional<ProcessUsageSample> ps = usage.apply(d);
        boolean utilMeasured = ps.isPresent() && ps.get().utilizationUnmeasured().isEmpty();
        if (ps.isEmpty()) {
            s.utilNote = NO_PROCESSES;
        } else if (!utilMeasured) {
            s.utilNote = "utilization not measured: " + ps.get().utilizationUnmeasured().get();
        }
        double total = 0;
        double untied = 0;
        double[] busy = s.busy;
        boolean[] busySet = s.busySet;
        if (ps.isPresent()) {
            Map<Integer, Attributed> known = attributed.get(d.index());
            if (known == null) {
                known = new HashMap<>();
                attributed.put(d.index(), known);
            }
            Set<String> holderIds = h.holderIds;
            long listed = ++listing;
            int current = 0; // pids of the map this listing showed
            for (GpuProcessUsage p : ps.get().processes()) {
                Optional<UsageOwner> o;
                if (h.external && externals != null) {
                    // pods' and Slurm jobs' GPUs: whom the sampler's pass over them found each process works for at
                    // this sweep (asked again every 10 s whatever the process: review60), no answer of the meter's own
                    o = externals.ownerSeen(d.index(), p.pid());
                } else {
                    Attributed was = known.get(p.pid());
                    // remembered while the holders and the process are the same: a pid another process took between two
                    // sweeps (freed and reused) has another incarnation, checked every REVALIDATE_MILLIS, and is asked
                    // about again (a source that cannot tell the incarnation is asked again then)
                    boolean same = was != null && was.holders.equals(holderIds);
                    if (same && (s.now < was.checkedAt || s.now - was.checkedAt >= REVALIDATE_MILLIS)) {
                        OptionalLong now = was.incarnation.isPresent() ? attribution.incarnation(p.pid())
                                : OptionalLong.empty();
                        same = now.isPresent() && now.equals(was.incarnation);
                        if (same) {
                            was.checkedAt = s.now;
                        }
                    }
                    if (same) {
                        o = was.owner;
                        if (was.listed != listed) {
                            was.listed = listed;
                            current++;
                        }
                    } else {
                        // the incarnation read before and after the owner: a pid that changed hands in between is not
                        // kept under the new process's incarnation with the old one's owner (review25)
                        OptionalLong before = attribution.incarnation(p.pid());
                        o = attribution.ownerOf(d, p.pid(), h.external ? List.of() : hs); // pods are no allocations
                        OptionalLong after = before.isPresent() ? attribution.incarnation(p.pid()) : before;
                        known.put(p.pid(), new Attributed(holderIds, o, before.equals(after) ? before
                                : OptionalLong.empty(), s.now, listed));
                        if (was == null || was.listed != listed) {
                            current++;
                        }
                    }
                }
                double u = p.smUtilizationPercent().orElse(0);
                total += u;
                int at = o.isEmpty() ? -1 : h.positionOf(o.get());
                if (at < 0) {
                    // tied to no holder of this GPU, whomever a chained source names (a Slurm job, a pod, on a GPU an
                    // allocation holds): its work may be a holder's, so it is no holder's idle time either (review54)
                    untied += u;
                    continue;
                }
                charge(s, at, u, p);
            }
            if (current != known.size()) { // processes gone from the list are forgotten
                known.values().removeIf(x -> x.listed != listed);
            }
        }
        // busy work no holder can be told from: processes no rule ties to a holder, or a device that reads busy while
        // no listed process does (MPS, a context of another namespace or VM, a process list missing one): unknown is
        // never idle (review23)
        // the device and its processes are not measured alike (time with any kernel against each process's SMs), so
        // only a device busier than its listed processes by UNSEEN_MARGIN counts: a wrong "busy" only keeps a GPU from
        // being reclaimed, a wrong "idle" ends a user's work (review25)
        double device = m.utilizationPercent().orElse(0);
        boolean unseenBusy = device > idleThreshold && (total <= idleThreshold || device - total > UNSEEN_MARGIN);
        s.unattributedBusy = utilMeasured && (untied > idleThreshold || unseenBusy);
        boolean memoryMeasured = ps.isPresent() && ps.get().memoryUnmeasured().isEmpty();
        boolean byUtil = utilMeasured && total > 0;
        for (int i = 0; i < hs.size(); i++) {
            int at = h.canonical[i];
            double charged = busySet[at] ? busy[at] : 0.0;
            if (utilMeasured) {
                s.util[at] = Math.min(100, charged);
                s.utilSet[at] = true;
            }
            if (memoryMeasured && !s.memorySet[at]) {
                s.memory[at] = 0L;
                s.memorySet[at] = true;
            }
            s.energyShare[at] = byUtil ? charged / total : 1.0 / hs.size();
        }
        s.shareNote = byUtil ? SPLIT_BY_UTIL : SPLIT_EQUALLY;
        if (h.external && hs.size() == 1 && utilMeasured && untied == 0 && !unseenBusy) {
            // one pod or job alone on the GPU, every busy process its own: the GPU's energy is all its, no split
            s.energyShare[h.canonical[0]] = 1.0;
            s.shareNote = null;
        }
    }

    /** Charges a process's utilization and memory to the holder at {@code at} of a shared GPU's sweep. */
    private static void charge(DeviceSweep s, int at, double u, GpuProcessUsage p) {
        if (s.busySet[at]) {
            s.busy[at] += u;
        } else {
            s.busy[at] = u;
            s.busySet[at] = true;
        }
        if (p.memoryUsed().isPresent()) {
            long bytes = p.memoryUsed().get().bytes();
            if (s.memorySet[at]) {
                s.memory[at] += bytes;
            } else {
                s.memory[at] = bytes;
                s.memorySet[at] = true;
            }
        }
    }

    /** An allocation's reading at a sweep: every GPU of it measured at or below the threshold. */
    private static final int IDLE = 0;
    /** A GPU of it measured busy (above the threshold, or busy work no holder of a shared GPU can be told from). */
    private static final int BUSY = 1;
    /** No GPU of it read busy, and one (or all) could not be read. */
    private static final int NEITHER = 2;

    /** @return the allocation's reading at this sweep: {@link #IDLE}, {@link #BUSY} or {@link #NEITHER} */
    private int reading(DeviceSweep[] sweeps, int[] slots, int[] positions) {
        boolean allIdle = true;
        boolean anyMeasured = false;
        for (int j = 0; j < slots.length; j++) {
            DeviceSweep s = sweeps[slots[j]];
            if (!s.utilSet[positions[j]]) {
                allIdle = false;
            } else if (s.util[positions[j]] > idleThreshold || s.unattributedBusy) {
                return BUSY;
            } else {
                anyMeasured = true;
            }
        }
        return allIdle && anyMeasured ? IDLE : NEITHER;
    }

    /** Credits [from, to) with the sweep's values, cutting the open interval at each UTC midnight crossed. */
    private void credit(Track tr, long from, long to, DeviceSweep[] sweeps, int[] slots, int[] positions,
            List<Interval> out) {
        int reading = reading(sweeps, slots, positions);
        boolean idle = reading == IDLE;
        // no GPU of it read busy, and one (or all) could not be read: not idle, but not busy either (review36); its
        // idle start, if it had one, is kept, as the policy keeps its state (review38)
        boolean neither = reading == NEITHER;
        if (neither) {
            unmeasured.add(tr.allocation.id());
        } else if (reading == BUSY) {
            if (tr.recordedIdle) {
                turned.add(tr);
            }
            // read busy: no part of this step is idle, the part cut at a midnight it crosses included (review43: that
            // part was written with the old idle start, and a crash left the store saying idle)
            tr.idleSince = null;
        }
        long cur = from;
        while (cur < to) {
            long midnight = nextMidnight(cur);
            long end = Math.min(to, midnight);
            for (int j = 0; j < slots.length; j++) {
                creditDevice(tr, j, cur, end, sweeps[slots[j]], positions[j]);
            }
            cur = end;
            tr.covered = cur;
            if (cur == midnight && cur < to) {
                if (idle && tr.idleSince == null) {
                    tr.idleSince = from;
                }
                out.add(close(tr, cur, Optional.empty(), false, false));
            }
        }
        tr.covered = to;
        if (neither) {
            return;
        }
        if (idle) {
            if (tr.idleSince == null) {
                tr.idleSince = from;
            }
            this.idle.computeIfAbsent(tr.allocation.id(), k -> Instant.ofEpochMilli(tr.idleSince));
        } else {
            tr.idleSince = null;
            if (tr.lastTickIdle) { // only an allocation idle at its last sweep can be in the map
                this.idle.remove(tr.allocation.id());
            }
        }
        tr.lastTickIdle = idle;
    }

    /** @param at the allocation's position among the device's holders */
    private void creditDevice(Track tr, int d, long from, long to, DeviceSweep s, int at) {
        long dt = to - from;
        UsageFigures f = tr.figures(d);
        f.heldMillis += dt;
        tr.carried[tr.slot[d]] = s != null && s.carried[at]; // the record's note says how it ends (close)
        if (s == null || !s.sampled) {
            note(tr, d, "not measured: the sweep read no metrics for this GPU");
            return;
        }
        f.measuredMillis += dt;
        if (s.utilSet[at]) {
            double u = s.util[at];
            f.utilizationMillis += dt;
            f.utilizationPercentMillis += u * dt;
            f.utilizationPeak = Math.max(f.utilizationPeak, u);
            if (u <= idleThreshold && s.unattributedBusy) {
                note(tr, d, UNATTRIBUTED_BUSY);
            } else if (u <= idleThreshold) {
                f.idleMillis += dt;
            }
        } else if (s.utilNote != null) {
            note(tr, d, s.utilNote);
        }
        if (s.memorySet[at]) {
            f.memoryPeakBytes = Math.max(f.memoryPeakBytes, s.memory[at]);
        }
        if (s.energy >= 0 && s.now > s.prev) {
            double share = s.energyShare[at];
            long mj = Math.round(s.energy * share * dt / (s.now - s.prev));
            f.energyMillijoules += mj;
            f.energyMillis += dt;
            if (!s.energyExact || s.shareNote != null) {
                f.estimatedMillijoules += mj;
            }
            if (s.shareNote != null) {
                note(tr, d, s.shareNote);
            }
            if (!s.energyExact) {
                note(tr, d, s.energyNote);
            }
        } else if (s.energyNote != null && s.now > s.prev) {
            note(tr, d, s.energyNote);
        }
    }

    /** Records [from, to) as nothing sampled: held time, energy where the counter bridges an exclusive GPU. */
    /**
     * @param endsNow whether the gap ends at this sweep (the first sweep of this meter: the counters are this sweep's
     *                metrics), else at the previous sweep (the counters then are the ones kept from it)
     */
    private void gap(Track tr, long from, long to, DeviceSweep[] sweeps, int[] slots, int[] positions,
            boolean endsNow, List<Interval> out) {
        if (tr.covered > tr.from || tr.first) {
            if (tr.covered > tr.from) {
                out.add(close(tr, tr.covered, Optional.empty(), false));
            }
        }
        // time no sweep saw is not idle time: the gap's records carry no idle start (review38: status counted a 3-h
        // suspension as idle until the next checkpoint)
        tr.idleBeforeGap = tr.idleSince != null ? from : null;
        tr.idleSince = null;
        if (tr.lastTickIdle) {
            idle.remove(tr.allocation.id());
            tr.lastTickIdle = false;
        }
        Map<Integer, Long> bridged = new HashMap<>();
        List<GpuDevice> devices = tr.allocation.devices();
        OptionalLong[] atEnd = new OptionalLong[devices.size()];
        for (int j = 0; j < slots.length; j++) {
            GpuDevice d = devices.get(j);
            OptionalLong before = tr.counter(j);
            GpuMetrics m = endsNow ? metricsAt(d.index()) : null;
            OptionalLong after = endsNow ? (m != null ? m.energyMillijoules() : OptionalLong.empty())
                    : lastCounter(d.index());
            atEnd[j] = after;
            DeviceSweep s = sweeps[slots[j]];
            boolean exclusive = s.exclusive && !s.mig; // sampled, one holder in exclusive mode
            if (exclusive && before.isPresent() && after.isPresent() && plausible(before, after, to - from)) {
                bridged.put(d.index(), after.getAsLong() - before.getAsLong());
            }
        }
        long cur = from;
        long span = to - from;
        while (cur < to) {
            long end = Math.min(to, nextMidnight(cur));
            for (int j = 0; j < devices.size(); j++) {
                GpuDevice d = devices.get(j);
                UsageFigures f = tr.figures(j);
                f.heldMillis += end - cur;
                Long e = bridged.get(d.index());
                if (e != null && span > 0) {
                    long mj = Math.round((double) e * (end - cur) / span);
                    f.energyMillijoules += mj;
                    f.energyMillis += end - cur;
                    if (end - cur != span) {
                        f.estimatedMillijoules += mj; // a counter delta spread over the days it spans
                    }
                    note(tr, j, "energy over the unsampled time from the energy counter's delta");
                }
                note(tr, j, NOT_SAMPLED);
                // the sweep that ends the gap kept a pod or job here without a source's answer: its record says so,
                // or a restart right after would carry it again (review63)
                tr.carried[tr.slot[j]] = sweeps[slots[j]].carried[positions[j]];
            }
            tr.covered = end;
            if (end == to) {
                // the gap's last part names the counters at its end (the sweep it ends at), as a credited interval
                // does, so a sampler restarted from it bridges its own gap from them; a part cut at a midnight names
                // none (review25). A sampler stopped right after its first sweep left a tail naming no counter, and
                // the next one's gap went without energy (review46)
                for (int j = 0; j < devices.size(); j++) {
                    tr.counter[tr.slot[j]] = atEnd[j];
                }
            }
            out.add(close(tr, end, Optional.empty(), true, end == to));
            cur = end;
        }
        tr.idleSince = null;
        idle.remove(tr.allocation.id());
    }

    /**
     * Ends an allocation: its last interval runs to {@code at} (the release), the time after the last sweep counted
     * as held but not measured.
     *
     * @return its last intervals (more than one where {@code at} is past a midnight), empty when it was not tracked
     */
    List<Interval> end(String id, Instant at, String cause) {
        ended.remove(id);
        ended.put(id, swept); // in the order of their ends
        Track tr = tracks.remove(id);
        idle.remove(id);
        if (tr != null) {
            trackMods++;
        }
        if (tr == null) {
            Interval tail = resumeFrom.remove(id);
            if (tail == null) {
                return List.of();
            }
            if (at.isAfter(tail.to())) { // released, as the event says, before this sampler's first sweep: the time
                // from its last record to the release is held, not sampled (review25), cut at each midnight
                List<Interval> out = new ArrayList<>();
                long cur = tail.to().toEpochMilli();
                long r = at.toEpochMilli();
                while (cur < r) {
                    long part = Math.min(r, nextMidnight(cur));
                    long held = part - cur;
                    out.add(new Interval(tail.allocationId(), tail.owner(), tail.ownerUid(), tail.jobId(),
                            Instant.ofEpochMilli(cur), Instant.ofEpochMilli(part), false, part == r
                                    ? Optional.of(cause) : Optional.empty(),
                            true, Optional.empty(),
                            tail.devices().stream().map(d -> {
                                UsageFigures f = new UsageFigures();
                                f.heldMillis = held;
                                return new DeviceUsage(d.index(), d.uuid(), f, OptionalLong.empty(), List.of(
                                        NOT_SAMPLED));
                            }).toList()));
                    cur = part;
                }
                return out;
            }
            // a pod's or job's track the sampler's first sweep did not find: GONE, its processes no longer listed
            // (the end of an allocation released while no sampler ran is UNOBSERVED)
            boolean gone = ExternalHolders.isExternal(tail.allocationId()) && cause.equals("GONE");
            return List.of(new Interval(tail.allocationId(), tail.owner(), tail.ownerUid(), tail.jobId(), tail.to(),
                    tail.to(), false, Optional.of(gone ? "GONE" : "UNOBSERVED"), false, Optional.empty(),
                    tail.devices().stream().map(d -> new DeviceUsage(d.index(), d.uuid(), new UsageFigures(),
                            d.counterAtEnd(), List.of(gone ? "its processes were no longer listed at " + tail.to()
                                    : "released after " + tail.to() + " while no sampler ran")))
                            .toList()));
        }
        long r = at.toEpochMilli();
        List<Interval> out = new ArrayList<>();
        if (r < tr.covered) {
            long len = tr.covered - tr.from;
            long keep = Math.max(0, r - tr.from);
            double f = len <= 0 ? 0 : (double) keep / len;
            for (UsageFigures x : tr.figures) {
                if (x != null) {
                    x.scale(f);
                }
            }
            tr.covered = Math.max(r, tr.from);
        }
        long cur = tr.covered;
        while (cur < r) {
            long endOfPart = Math.min(r, nextMidnight(cur));
            for (int j = 0; j < tr.slot.length; j++) {
                tr.figures(j).heldMillis += endOfPart - cur;
            }
            cur = endOfPart;
            tr.covered = cur;
            if (cur < r) {
                out.add(close(tr, cur, Optional.empty(), false, false));
            }
        }
        out.add(close(tr, tr.covered, Optional.of(cause), false));
        return out;
    }

    /**
     * @return whether every tracked allocation is among {@code live} (then {@link #endVanished} has nothing to end):
     *         answered without building a set of the live ids
     */
    boolean allTrackedLive(List<Allocation> live) {
        Layout l = layout;
        if (l != null && l.allTrackedAt == trackMods && l.sameAs(live)) {
            sameAsLayout = live; // the sweep's observe need not compare them again
            return true; // the last sweep tracked exactly these allocations, and no track came or went since
        }
        long stamp = ++liveChecks;
        int found = 0;
        for (Allocation a : live) {
            Track tr = tracks.get(a.id());
            if (tr != null && tr.seenLive != stamp) {
                tr.seenLive = stamp;
                found++;
            }
        }
        return found == tracks.size();
    }

    /**
     * Ends allocations tracked but no longer live that no event ended (released by a process whose record this one
     * did not see): each ends at its last sweep, marked {@code UNOBSERVED}.
     */
    List<Interval> endVanished(Set<String> live) {
        if (live.containsAll(tracks.keySet())) {
            return List.of();
        }
        List<Interval> out = new ArrayList<>();
        for (String id : new ArrayList<>(tracks.keySet())) {
            if (!live.contains(id)) {
                Track tr = tracks.get(id);
                // a pod or job whose processes the sampler saw go: GONE, not "while no sampler ran" (review59)
                out.addAll(end(id, Instant.ofEpochMilli(tr.covered), ExternalHolders.isExternal(id) ? "GONE"
                        : "UNOBSERVED"));
            }
        }
        return out;
    }

    /** @return the allocations left open by the store that are not live: each ended as released unobserved */
    List<Interval> endResumedNotLive(Set<String> live) {
        List<Interval> out = new ArrayList<>();
        for (String id : new ArrayList<>(resumeFrom.keySet())) {
            if (!live.contains(id)) {
                // a pod's or job's track the first sweep did not find: GONE, as when a running sampler sees it go
                out.addAll(end(id, Instant.EPOCH, ExternalHolders.isExternal(id) ? "GONE" : "UNOBSERVED"));
            }
        }
        return out;
    }

    /**
     * Closes the open interval, at this sweep, of each allocation whose last record says idle and that the sweep read
     * busy (a checkpoint of those alone): the store no longer says idle once a GPU of it was busy, whenever the
     * sampler stops (review42: a crash before the next checkpoint lost a busy spell, and the restarted policy counted
     * the idle time before it). At most one such record per allocation per checkpoint interval.
     *
     * @return the intervals
     */
    List<Interval> turnedBusy() {
        if (turned.isEmpty()) {
            return List.of();
        }
        List<Interval> out = new ArrayList<>(turned.size());
        for (Track tr : turned) {
            if (tracks.get(tr.allocation.id()) == tr && tr.recordedIdle && tr.covered > tr.from) {
                out.add(close(tr, tr.covered, Optional.empty(), false));
            }
        }
        turned.clear();
        return out;
    }

    /**
     * Closes every open interval at its last sweep and opens the next one there.
     *
     * @return the intervals (allocations granted since the last sweep and not yet swept have none)
     */
    List<Interval> checkpoint() {
        List<Interval> out = new ArrayList<>();
        for (Track tr : tracks.values()) {
            if (tr.covered > tr.from || tr.first) { // a grant is recorded at the first checkpoint, even if empty
                out.add(close(tr, tr.covered, Optional.empty(), false));
            }
        }
        return out;
    }

    private Interval close(Track tr, long to, Optional<String> end, boolean gap) {
        return close(tr, to, end, gap, true);
    }

    /**
     * @param counterAtTo whether the track's counters (read at its last sweep) are the counters at {@code to}: not for
     *                    a part cut at a midnight between two sweeps, whose record then names no counter, so that a
     *                    sampler restarted from it never bridges from a counter older than its end (the energy from
     *                    that sweep to midnight counted twice; review25)
     */
    private Interval close(Track tr, long to, Optional<String> end, boolean gap, boolean counterAtTo) {
        Allocation a = tr.allocation;
        List<DeviceUsage> devices = new ArrayList<>();
        List<GpuDevice> ds = a.devices();
        for (int j = 0; j < ds.size(); j++) {
            GpuDevice d = ds.get(j);
            if (tr.carried[tr.slot[j]]) {
                // kept there without a source's answer at its last sweep: a restarted sampler does not carry the
                // track on this GPU again (ExternalHolders)
                note(tr, j, ExternalHolders.CARRIED);
            }
            UsageFigures f = tr.figures[tr.slot[j]];
            Set<String> n = tr.notes[tr.slot[j]];
            if (f != null && !RecordCodec.plausibleEnergy(f)) { // sweeps that each used the clock's allowance: the
                // record would be refused when read; its energy is not measured, as the reader would say
                f.energyMillijoules = 0;
                f.estimatedMillijoules = 0;
                f.energyMillis = 0;
                note(tr, j, RecordCodec.ENERGY_REFUSED);
                n = tr.notes[tr.slot[j]];
            }
            List<String> notes = List.of();
            if (n != null) { // a set's texts in their natural order (sorted as a TreeSet keeps them), the first few
                List<String> sorted = new ArrayList<>(n);
                Collections.sort(sorted);
                notes = sorted.subList(0, Math.min(sorted.size(), RecordCodec.MAX_NOTES));
            }
            devices.add(new DeviceUsage(d.index(), d.uuid(), f != null ? f : new UsageFigures(),
                    counterAtTo ? tr.counter(j) : OptionalLong.empty(), notes));
        }
        Interval iv = new Interval(a.id(), a.owner(), a.request().ownerUid(), a.request().jobId(),
                Instant.ofEpochMilli(tr.from), Instant.ofEpochMilli(to), tr.first, end, gap,
                tr.idleSince == null || end.isPresent() ? Optional.empty() : Optional.of(Instant.ofEpochMilli(
                        tr.idleSince)),
                devices);
        tr.from = to;
        tr.first = false;
        if (!gap) {
            // a gap's record carries no idle start, yet a stretch continues across a short one: what the store says
            // of the allocation stays what its record before the gap said (review43)
            tr.recordedIdle = iv.idleSince().isPresent();
        }
        Arrays.fill(tr.figures, null);
        Arrays.fill(tr.notes, null);
        return iv;
    }

    private static void note(Track tr, int d, String note) {
        Set<String> n = tr.notes[tr.slot[d]];
        if (n == null) {
            n = new HashSet<>(4);
            tr.notes[tr.slot[d]] = n;
        }
        n.add(note); // sorted when written
    }

    /** @return the first UTC midnight after {@code millis} (java.time's UTC days are 86,400,000 ms long) */
    static long nextMidnight(long millis) {
        return (Math.floorDiv(millis, DAY_MILLIS) + 1) * DAY_MILLIS;
    }

    private static final long DAY_MILLIS = 86_400_000L;

    /**
     * @return the intervals of an allocation no sweep saw (granted and released between two sweeps): held time only,
     *         cut at each UTC midnight, the first marked as the grant and the last with its end
     */
    static List<Interval> unsampled(String id, Optional<String> owner, Optional<String> jobId,
            List<GpuDevice> devices, Instant from, Instant to, String cause) {
        List<Interval> out = new ArrayList<>();
        long cur = from.toEpochMilli();
        long end = Math.max(cur, to.toEpochMilli());
        boolean first = true;
        do {
            long part = Math.min(end, nextMidnight(cur));
            List<DeviceUsage> ds = new ArrayList<>();
            for (GpuDevice d : devices) {
                UsageFigures f = new UsageFigures();
                f.heldMillis = part - cur;
                ds.add(new DeviceUsage(d.index(), d.uuid(), f, OptionalLong.empty(), List.of("not sampled: granted"
                        + " and released between two sweeps of the node's sampler")));
            }
            out.add(new Interval(id, owner, OptionalLong.empty(), jobId, Instant.ofEpochMilli(cur),
                    Instant.ofEpochMilli(part), first, part == end ? Optional.of(cause) : Optional.empty(), true,
                    Optional.empty(), ds));
            first = false;
            cur = part;
        } while (cur < end);
        return out;
    }
}
