package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Usage over a period, grouped: what {@code gpusched report}, the console's usage page and {@code /api/v1/usage} show.
 *
 * <p>How a period is cut: every interval lies within one UTC day; an interval that straddles {@code since} or
 * {@code until} counts in proportion to its overlap (intervals are at most {@code gpu.accounting.checkpoint} long,
 * and a whole day once compacted), peaks as they are. A whole day inside the period is read from its summary where it
 * has one. So figures of consecutive periods add up to the figures of their union, and per-day rows add up to the
 * period's total.
 *
 * @param since       start of the period (inclusive)
 * @param until       end of the period (exclusive)
 * @param by          how rows are grouped
 * @param rows        one per group, by key
 * @param total       the whole period
 * @param allocations allocations granted in the period
 * @param idle        the idle policy's steps in the period, oldest first
 * @param warnings    lines of the store that could not be read (skipped)
 */
public record UsageReport(Instant since, Instant until, GroupBy by, List<Row> rows, UsageFigures total,
        long allocations, List<IdleAction> idle, List<String> warnings) {

    /** The key of the owner row of allocations without an owner: empty, which no owner can be. */
    public static final String NO_OWNER = "";

    /** Copies the lists. */
    public UsageReport {
        Objects.requireNonNull(since, "since");
        Objects.requireNonNull(until, "until");
        rows = List.copyOf(rows);
        idle = List.copyOf(idle);
        warnings = List.copyOf(warnings);
    }

    /** How a report's rows are grouped. */
    public enum GroupBy {
        /**
         * One row per owner; allocations without one: the row keyed {@link UsageReport#NO_OWNER} (an empty key, which
         * no owner can be: owners are never blank), apart from any owner's, {@code -} included.
         */
        OWNER,
        /** One row per allocation. */
        ALLOCATION,
        /** One row per GPU index. */
        DEVICE,
        /** One row per UTC day. */
        DAY,
        /**
         * One row per Kubernetes pod ({@code <namespace>/<pod>}) that used a GPU no allocation held, its owner the
         * namespace; everything else: the row keyed {@link UsageReport#NO_OWNER}.
         */
        POD,
        /**
         * One row per Slurm job (its id) and user that used a GPU no allocation held, its owner the job's user
         * (Slurm reuses job ids: one id of two users is two rows); everything else: the row keyed
         * {@link UsageReport#NO_OWNER}.
         */
        SLURM_JOB;

        /** @return the grouping as {@code --by} takes it: {@code owner}, ..., {@code slurm-job} */
        public String word() {
            return name().toLowerCase(Locale.ROOT).replace('_', '-');
        }

        /** @return whether day summaries hold its rows (pods' and jobs' rows come from the intervals) */
        boolean summarized() {
            return this == OWNER || this == DEVICE || this == DAY;
        }

        /** @throws IllegalArgumentException naming the valid groupings */
        public static GroupBy parse(String s) {
            // by its ASCII name, in either case: upper-casing first took "devıce" (a dotless ı) for DEVICE (review53)
            for (GroupBy g : values()) {
                if (g.word().equalsIgnoreCase(s) && s.chars().allMatch(c -> c < 0x80)) {
                    return g;
                }
            }
            throw new IllegalArgumentException("--by " + RecordCodec.printable(s) + " is not a grouping; valid:"
                    + " owner, allocation, device, day, pod, slurm-job");
        }
    }

    /**
     * One group's usage.
     *
     * @param key         the owner, allocation id, GPU index or day
     * @param owner       the owner (allocation and owner rows; empty for the row of allocations without an owner)
     * @param jobId       the job (for allocation rows)
     * @param devices     the GPU indices seen in the group
     * @param from        the earliest interval start in the group
     * @param to          the latest interval end in the group
     * @param end         how the allocation ended (for allocation rows), if it did in the period
     * @param allocations allocations granted in the period
     * @param figures     the group's figures
     * @param idleSteps   idle-policy steps taken in the period (for allocation and owner rows)
     * @param notes       why figures are missing or estimated (distinct, at most 8)
     */
    public record Row(String key, Optional<String> owner, Optional<String> jobId, Set<Integer> devices, Instant from,
            Instant to, Optional<String> end, long allocations, UsageFigures figures, Set<IdleStep> idleSteps,
            Set<String> notes) {
    }

    /**
     * Builds a report from the store.
     *
     * @param store the node's store
     * @param since start, inclusive
     * @param until end, exclusive (after {@code since})
     * @param by    the grouping
     * @return the report
     * @throws IllegalArgumentException when {@code until} is not after {@code since}
     */
    public static UsageReport of(AccountingStore store, Instant since, Instant until, GroupBy by) {
        if (!until.isAfter(since)) {
            throw new IllegalArgumentException("--until " + until + " is not after --since " + since);
        }
        Builder b = new Builder(since, until, by);
        LocalDate first = LocalDate.ofInstant(since, ZoneOffset.UTC);
        LocalDate last = LocalDate.ofInstant(until.minusMillis(1), ZoneOffset.UTC);
        List<LocalDate> days = store.days();
        for (LocalDate d : days) {
            if (d.isBefore(first) || d.isAfter(last)) {
                continue;
            }
            Instant start = d.atStartOfDay().toInstant(ZoneOffset.UTC);
            Instant end = d.plusDays(1).atStartOfDay().toInstant(ZoneOffset.UTC);
            boolean whole = !start.isBefore(since) && !end.isAfter(until);
            if (whole && by.summarized() && store.hasSummary(d)) {
                store.readSummary(d, r -> {
                    if (r instanceof DaySummary s) {
                        b.summary(s);
                    } else if (r instanceof IdleAction a) {
                        b.action(a);
                    }
                }, b.warnings);
            } else {
                store.readDay(d, b::record, b.warnings);
            }
        }
        return b.build();
    }

    /**
     * @return the pod ({@code <namespace>/<pod>}) or Slurm job id an interval is of, by the grouping; {@link #NO_OWNER}
     *         for the rest (allocations, and the other kind)
     */
    static String jobKey(Interval iv, GroupBy by) {
        String prefix = by == GroupBy.POD ? ExternalHolders.POD : ExternalHolders.SLURM_JOB;
        String id = iv.allocationId();
        if (!id.startsWith(prefix)) {
            return NO_OWNER;
        }
        // the id's, whole: a job id is cut at 256 characters, a namespace and pod name may be 317 (review59)
        String k = ExternalHolders.keyOf(id).substring(prefix.length());
        return k.isEmpty() ? NO_OWNER : k;
    }

    /** Accumulates rows. */
    private static final class Builder {
        final Instant since;
        final Instant until;
        final GroupBy by;
        final Map<String, RowAcc> rows = new TreeMap<>();
        final UsageFigures total = new UsageFigures();
        long allocations;
        final List<IdleAction> idle = new ArrayList<>();
        final List<String> warnings = new ArrayList<>();

        Builder(Instant since, Instant until, GroupBy by) {
            this.since = since;
            this.until = until;
            this.by = by;
        }

        void record(AccountingRecord r) {
            if (r instanceof Interval iv) {
                interval(iv);
            } else if (r instanceof IdleAction a) {
                action(a);
            }
        }

        void action(IdleAction a) {
            if (!a.at().isBefore(since) && a.at().isBefore(until)) {
                idle.add(a); // marked on its row when the rows are complete: a step may be read before its row's
                // first interval (written before the checkpoint that covers it; review23)
            }
        }

        /** Marks each row with the idle steps of its owner or allocation. */
        private void markIdleSteps() {
            for (IdleAction a : idle) {
                String key = switch (by) {
                    case OWNER -> a.owner().orElse(NO_OWNER);
                    case ALLOCATION -> a.allocationId();
                    default -> null;
                };
                RowAcc row = key == null ? null : rows.get(key);
                if (row != null) {
                    row.steps.add(a.action());
                }
            }
        }

        void interval(Interval iv) {
            long from = iv.from().toEpochMilli();
            long to = iv.to().toEpochMilli();
            long lo = Math.max(from, since.toEpochMilli());
            long hi = Math.min(to, until.toEpochMilli());
            boolean point = from == to && !iv.from().isBefore(since) && iv.from().isBefore(until);
            if (hi <= lo && !point) {
                return;
            }
            double f = to == from ? 1 : (double) (hi - lo) / (to - from);
            boolean granted = iv.first() && !iv.from().isBefore(since) && iv.from().isBefore(until);
            if (granted) {
                allocations++;
            }
            for (DeviceUsage d : iv.devices()) {
                UsageFigures x = d.figures();
                if (f < 1) {
                    x.scale(f);
                }
                String key = switch (by) {
                    case OWNER -> iv.owner().orElse(NO_OWNER);
                    case ALLOCATION -> iv.allocationId();
                    case DEVICE -> Integer.toString(d.index());
                    case DAY -> AccountingStore.dayOf(iv.from()).toString();
                    case POD, SLURM_JOB -> jobKey(iv, by);
                };
                RowAcc acc = rows.computeIfAbsent(rowKey(key, iv), k -> new RowAcc(key));
                acc.add(x, d.index(), iv.from(), iv.to(), d.notes());
                if (by == GroupBy.OWNER) {
                    acc.owner = iv.owner();
                } else if ((by == GroupBy.POD || by == GroupBy.SLURM_JOB) && !key.equals(NO_OWNER)) {
                    acc.owner = acc.owner.or(iv::owner);
                    acc.job = Optional.of(key);
                } else if (by == GroupBy.ALLOCATION) {
                    acc.owner = acc.owner.or(iv::owner);
                    acc.job = acc.job.or(iv::jobId);
                    if (iv.end().isPresent()) {
                        acc.end = iv.end();
                    }
                }
                total.add(x);
            }
            if (granted) {
                String key = switch (by) {
                    case OWNER -> iv.owner().orElse(NO_OWNER);
                    case ALLOCATION -> iv.allocationId();
                    case DEVICE -> iv.devices().isEmpty() ? null : Integer.toString(iv.devices().get(0).index());
                    case DAY -> AccountingStore.dayOf(iv.from()).toString();
                    case POD, SLURM_JOB -> jobKey(iv, by);
                };
                if (key != null) {
                    rows.computeIfAbsent(rowKey(key, iv), k -> new RowAcc(key)).allocations++;
                }
            }
        }

        /**
         * @return the accumulator's key: the row's, but for a Slurm job's, which is its id and its user's (Slurm
         *         reuses job ids, after MaxJobId or a controller's reset: one user's job is never shown as another's;
         *         review65)
         */
        private String rowKey(String key, Interval iv) {
            if (by != GroupBy.SLURM_JOB || key.equals(NO_OWNER)) {
                return key;
            }
            return key + '\u0000' + iv.owner().orElse("");
        }

        void summary(DaySummary s) {
            if (s.gpuRow() != (by == GroupBy.DEVICE)) {
                return; // by device: the GPU rows; otherwise the owner rows (each row kind covers the whole day)
            }
            String key = switch (by) {
                case OWNER -> s.owner().orElse(NO_OWNER);
                case DEVICE -> Integer.toString(s.index().getAsInt());
                case DAY -> s.day().toString();
                case ALLOCATION, POD, SLURM_JOB -> throw new IllegalStateException("summaries have no " + by.word()
                        + " rows");
            };
            RowAcc acc = rows.computeIfAbsent(key, RowAcc::new);
            if (by == GroupBy.OWNER) {
                acc.owner = s.owner();
            }
            Instant start = s.day().atStartOfDay().toInstant(ZoneOffset.UTC);
            // the GPUs an owner row's allocations held and the notes of their devices, or a GPU row's: as the
            // day's intervals give them (review53)
            acc.add(s.figures(), s.index().orElse(-1), start, start.plusSeconds(86_400), s.notes());
            if (!s.gpuRow()) {
                acc.devices.addAll(s.gpus());
            }
            acc.allocations += s.allocations(); // each allocation is counted on its first device only
            allocations += s.allocations();
            total.add(s.figures());
        }

        UsageReport build() {
            markIdleSteps();
            List<Row> out = new ArrayList<>();
            for (RowAcc r : rows.values()) {
                // sorted sets: the same report reads the same, run after run (review55 saw "gpus": [1, 0])
                out.add(new Row(r.key, r.owner, r.job, Collections.unmodifiableSortedSet(new TreeSet<>(r.devices)),
                        r.from == null ? since : r.from, r.to == null ? since : r.to, r.end, r.allocations,
                        r.figures, Collections.unmodifiableSet(EnumSet.copyOf(r.steps)),
                        Collections.unmodifiableSortedSet(new TreeSet<>(r.notes))));
            }
            if (by == GroupBy.DEVICE) {
                out.sort((x, y) -> Integer.compare(Integer.parseInt(x.key()), Integer.parseInt(y.key())));
            }
            return new UsageReport(since, until, by, out, total, allocations, idle, warnings);
        }
    }

    private static final class RowAcc {
        final String key;
        Optional<String> owner = Optional.empty();
        Optional<String> job = Optional.empty();
        Optional<String> end = Optional.empty();
        final TreeSet<Integer> devices = new TreeSet<>();
        Instant from;
        Instant to;
        long allocations;
        final UsageFigures figures = new UsageFigures();
        final Set<IdleStep> steps = EnumSet.noneOf(IdleStep.class);
        /** the first {@link RecordCodec#MAX_NOTES} in text order, as compaction keeps them (review55) */
        final TreeSet<String> notes = new TreeSet<>();

        RowAcc(String key) {
            this.key = key;
        }

        void add(UsageFigures f, int device, Instant a, Instant b, List<String> n) {
            figures.add(f);
            if (device >= 0) {
                devices.add(device);
            }
            from = from == null || a.isBefore(from) ? a : from;
            to = to == null || b.isAfter(to) ? b : to;
            for (String x : n) {
                notes.add(x);
                if (notes.size() > RecordCodec.MAX_NOTES) {
                    notes.pollLast();
                }
            }
        }
    }
}
