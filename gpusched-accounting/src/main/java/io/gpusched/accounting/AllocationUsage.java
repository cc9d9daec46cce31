package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One allocation's usage, per GPU and in total: {@code gpusched report ID} (the {@code jobstats} view) and
 * {@code /api/v1/usage/allocations/{id}}.
 *
 * @param id          the allocation
 * @param owner       its owner
 * @param jobId       its job
 * @param from        its first interval's start (the grant, when {@code complete})
 * @param to          its last interval's end (the release, when {@code end} is present)
 * @param end         how it ended; empty while it runs
 * @param complete    whether the store still holds its grant (false: older days were deleted by retention)
 * @param devices     per GPU: index, UUID, figures, notes
 * @param total       all GPUs together
 * @param idle        the idle policy's steps on it
 * @param gaps        milliseconds of its GPUs' held time no sample covered, summed over GPUs: {@code gap} intervals (no
 *                    sampler ran), the time after the last sweep before the release, sweeps that read no metrics
 *                    for a GPU (held minus sampled time, so compaction, which sums intervals, keeps it)
 */
public record AllocationUsage(String id, Optional<String> owner, Optional<String> jobId, Instant from, Instant to,
        Optional<String> end, boolean complete, List<Device> devices, UsageFigures total, List<IdleAction> idle,
        long gaps) {

    /**
     * One GPU of it.
     *
     * @param index   device index
     * @param uuid    device UUID
     * @param figures its figures
     * @param notes   why figures are missing or estimated
     */
    public record Device(int index, String uuid, UsageFigures figures, List<String> notes) {
    }

    /** The most tracks of one Slurm job {@link #findJob} adds up (a job of more GPU steps is refused, naming some). */
    public static final int MAX_JOB_TRACKS = 1000;

    /**
     * @param store the node's store
     * @param id    an allocation id
     * @return its usage, or empty when the store has no record of it
     */
    public static Optional<AllocationUsage> find(AccountingStore store, String id) {
        return read(store, id, Set.of(id));
    }

    /**
     * What {@code gpusched report ID} and {@code /api/v1/usage?allocation=ID} show for a job id: the one allocation
     * (or pod or Slurm job track) it ran as, or, for a Slurm job whose steps used GPUs apart (a track ends at the first
     * sweep none of its processes is listed), all its tracks added up, as one user's job (review65). A Slurm job id
     * two users' jobs had (Slurm reuses ids), or a gpusched or pod job that ran as several allocations, is refused.
     * {@code slurm-job:<id>}, the id an added-up job is shown with, names that Slurm job's tracks only (unless a job is
     * named so itself).
     *
     * @param store the node's store
     * @param jobId a job id (a gpusched job's, {@code <namespace>/<pod>}, a Slurm job id)
     * @return its usage; empty when no record names that job
     * @throws JobRanAsSeveralException naming the allocations, newest first, when it cannot be shown as one
     */
    public static Optional<AllocationUsage> findJob(AccountingStore store, String jobId) {
        String job = jobId;
        List<String> ids = allocationsOfJob(store, jobId, MAX_JOB_TRACKS + 1);
        if (jobId.startsWith(ExternalHolders.SLURM_JOB) && jobId.indexOf('@') < 0) {
            // the id an added-up Slurm job is shown with, taken back: that job's tracks only (review66); a job named
            // so itself (a gpusched job id may be any printable text: review67) as well is two jobs: refused, naming
            // both (review68)
            String slurmJob = jobId.substring(ExternalHolders.SLURM_JOB.length());
            String p = ExternalHolders.SLURM_JOB + slurmJob + "@";
            List<String> tracks = allocationsOfJob(store, slurmJob, Integer.MAX_VALUE).stream()
                    .filter(i -> i.startsWith(p)).limit(MAX_JOB_TRACKS + 1).toList();
            if (!tracks.isEmpty() && !ids.isEmpty()) {
                List<String> both = new ArrayList<>(ids.subList(0, Math.min(5, ids.size())));
                both.addAll(tracks.subList(0, Math.min(6, tracks.size())));
                throw new JobRanAsSeveralException(jobId, both);
            }
            if (ids.isEmpty()) {
                job = slurmJob;
                ids = tracks;
            }
        }
        String prefix = ExternalHolders.SLURM_JOB + job + "@";
        if (ids.size() <= 1) {
            return ids.isEmpty() ? Optional.empty() : find(store, ids.get(0));
        }
        if (ids.size() <= MAX_JOB_TRACKS && ids.stream().allMatch(i -> i.startsWith(prefix))) {
            Optional<AllocationUsage> u = read(store, ExternalHolders.SLURM_JOB + job, Set.copyOf(ids));
            if (u.isPresent()) {
                return u;
            }
        }
        throw new JobRanAsSeveralException(jobId, ids.subList(0, Math.min(11, ids.size())));
    }

    /**
     * A job id that names several allocations {@link #findJob} cannot show as one.
     */
    public static final class JobRanAsSeveralException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        /** the allocations, newest first: at most 10, then a "..." */
        private final List<String> allocations;

        JobRanAsSeveralException(String jobId, List<String> ids) {
            super("job \"" + RecordCodec.printable(jobId) + "\" ran as " + (ids.size() > 10 ? "more than 10"
                    : ids.size()) + " allocations (newest first: " + String.join(", ",
                            ids.subList(0,
                                    Math.min(10, ids.size())))
                    + (ids.size() > 10 ? ", ..." : "") + "); give one of them");
            this.allocations = List.copyOf(ids.subList(0, Math.min(10, ids.size())));
        }

        /** @return the allocations it ran as, newest first (at most 10) */
        public List<String> allocations() {
            return allocations;
        }
    }

    /**
     * @return the usage of the allocations {@code ids} added up under {@code id}; empty when none is recorded, or when
     *         several are and their records name different owners
     */
    private static Optional<AllocationUsage> read(AccountingStore store, String id, Set<String> ids) {
        List<LocalDate> days = store.days();
        List<Interval> found = new ArrayList<>();
        List<IdleAction> idle = new ArrayList<>();
        List<String> warnings = new ArrayList<>();
        Set<String> granted = new HashSet<>();
        boolean complete = false;
        for (int i = days.size() - 1; i >= 0 && !complete; i--) {
            store.readDay(days.get(i), r -> {
                if (r instanceof Interval iv && ids.contains(iv.allocationId())) {
                    found.add(iv);
                    if (iv.first()) {
                        granted.add(iv.allocationId());
                    }
                } else if (r instanceof IdleAction a && ids.contains(a.allocationId())) {
                    idle.add(a);
                }
            }, warnings);
            complete = granted.containsAll(ids);
        }
        if (found.isEmpty()) {
            return Optional.empty();
        }
        if (ids.size() > 1 && found.stream().map(Interval::owner).distinct().count() > 1) {
            return Optional.empty(); // one id of two users' jobs: not one job
        }
        found.sort((a, b) -> a.from().compareTo(b.from()));
        idle.sort((a, b) -> a.at().compareTo(b.at()));
        Map<Integer, UsageFigures> per = new TreeMap<>();
        Map<Integer, String> uuids = new TreeMap<>();
        Map<Integer, TreeSet<String>> notes = new TreeMap<>();
        UsageFigures total = new UsageFigures();
        long gaps = 0;
        Optional<String> end = Optional.empty();
        Instant to = found.get(0).to();
        for (Interval iv : found) {
            for (DeviceUsage d : iv.devices()) {
                per.computeIfAbsent(d.index(), k -> new UsageFigures()).add(d.figures());
                uuids.put(d.index(), d.uuid());
                TreeSet<String> n = notes.computeIfAbsent(d.index(), k -> new TreeSet<>());
                n.addAll(d.notes());
                while (n.size() > RecordCodec.MAX_NOTES) { // the first in text order, as compaction keeps (review55)
                    n.pollLast();
                }
                total.add(d.figures());
                gaps += d.figures().heldMillis() - d.figures().measuredMillis();
            }
            end = iv.end().isPresent() ? iv.end() : end;
            to = iv.to().isAfter(to) ? iv.to() : to;
        }
        if (ids.size() > 1) {
            // the newest track's end when every track ended; running while one has not (an older track's GONE is
            // not the job's end)
            Set<String> ended = new HashSet<>();
            found.stream().filter(iv -> iv.end().isPresent()).forEach(iv -> ended.add(iv.allocationId()));
            if (!ended.containsAll(ids)) {
                end = Optional.empty();
            }
        }
        List<Device> devices = new ArrayList<>();
        per.forEach((i, f) -> devices.add(new Device(i, uuids.get(i), f, List.copyOf(notes.get(i)))));
        Interval first = found.get(0);
        return Optional.of(new AllocationUsage(id, first.owner(), first.jobId(), first.from(), to, end, complete,
                devices, total, idle, gaps));
    }

    /**
     * The allocations a job ran as ({@link Interval#jobId}: the service's job id, a job runner's), newest grant
     * first: {@code gpusched report ID} takes a job id too (review53).
     *
     * @param store the node's store
     * @param jobId a job id
     * @param max   most ids returned
     * @return the ids of the allocations whose records name that job, at most {@code max}
     */
    public static List<String> allocationsOfJob(AccountingStore store, String jobId, int max) {
        Map<String, Instant> from = new HashMap<>();
        List<String> warnings = new ArrayList<>();
        String keyed = RecordCodec.keyed("job", jobId); // only lines that name the job are decoded
        // a pod's or Slurm job's tracks by their ids, which hold the whole name (a job id is cut at 256 characters:
        // review59)
        List<String> tracks = List.of(ExternalHolders.POD + jobId, ExternalHolders.SLURM_JOB + jobId);
        List<String> trackKeys = tracks.stream().map(t -> {
            String k = RecordCodec.keyed("id", t + "@");
            return k.substring(0, k.length() - 1); // no closing quote: the id goes on with the first sweep's time
        }).toList();
        for (LocalDate d : store.days()) {
            store.readDay(d, line -> line.contains(keyed) || line.contains(trackKeys.get(0))
                    || line.contains(trackKeys.get(1)), r -> {
                        if (r instanceof Interval iv && (iv.jobId().isPresent() && iv.jobId().get().equals(jobId)
                                && !ExternalHolders.isExternal(iv.allocationId())
                                || tracks.contains(ExternalHolders.keyOf(iv.allocationId())))) {
                            from.merge(iv.allocationId(), iv.from(), (a, b) -> a.isBefore(b) ? a : b);
                        }
                    }, warnings);
        }
        return from.entrySet().stream().sorted((a, b) -> b.getValue().compareTo(a.getValue())).limit(max)
                .map(Map.Entry::getKey).toList();
    }

    /** @return one line: "2 GPUs, 31 % mean utilization, idle 62 % of the time, 1.24 kWh, peak memory 20.0 GiB" */
    public String verdict() {
        return verdict(devices.size(), total);
    }

    /** @return the verdict line for figures over {@code gpus} GPUs */
    public static String verdict(int gpus, UsageFigures f) {
        StringBuilder b = new StringBuilder();
        b.append(gpus).append(gpus == 1 ? " GPU" : " GPUs");
        b.append(", ").append(String.format(Locale.ROOT, "%.2f", f.heldMillis() / 3.6e6)).append(" GPU-hours");
        if (f.meanUtilization().isPresent()) {
            b.append(", ").append(Math.round(f.meanUtilization().getAsDouble())).append(" % mean utilization");
            b.append(", idle ").append(Math.round(100 * f.idleFraction().orElse(0))).append(" % of the time");
        } else {
            b.append(", utilization not measured");
        }
        if (f.energyMillis() > 0) {
            b.append(", ").append(String.format(Locale.ROOT, "%.3f", f.kilowattHours())).append(" kWh");
            if (f.energyEstimated()) {
                b.append(f.estimatedMillijoules() == f.energyMillijoules() ? " (estimated)" : " (partly estimated)");
            }
        } else {
            b.append(", energy not measured");
        }
        if (f.memoryPeakBytes().isPresent()) {
            b.append(", peak memory ").append(String.format(Locale.ROOT, "%.1f GiB", f.memoryPeakBytes().getAsLong()
                    / (double) (1L << 30)));
        }
        if (f.heldMillis() > f.measuredMillis()) { // floor: a few seconds unsampled never read as 100 %
            b.append(" (").append((long) Math.floor(100.0 * f.measuredMillis() / f.heldMillis()))
                    .append(" % of the time sampled)");
        }
        return b.toString();
    }
}
