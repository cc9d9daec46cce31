package io.gpusched.accounting;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * One line of the accounting store (the format is {@link RecordCodec}'s and docs/ACCOUNTING.md's): an interval of one
 * allocation's usage, a checkpoint marker, an idle-policy action, the idle policy's count, or a day's summary row.
 */
public sealed interface AccountingRecord {

    /** @return the time that places the record in a day file: an interval's start, a marker's or action's time */
    Instant at();

    /**
     * One device's figures within an {@link Interval}.
     *
     * @param index         the device index
     * @param uuid          its UUID
     * @param figures       what the allocation did with it over the interval (copied)
     * @param counterAtEnd  the device's energy counter (mJ since driver load) at the interval's end, where read: a
     *                      sampler that restarts carries energy across the time it was down from this value
     * @param notes         why a figure is missing or estimated ("utilization not measured: MIG ..."), at most
     *                      {@link RecordCodec#MAX_NOTES}
     */
    record DeviceUsage(int index, String uuid, UsageFigures figures, OptionalLong counterAtEnd, List<String> notes) {
        /** Copies the figures and the notes. */
        public DeviceUsage {
            Objects.requireNonNull(uuid, "uuid");
            figures = figures.copy();
            Objects.requireNonNull(counterAtEnd, "counterAtEnd");
            notes = List.copyOf(notes);
        }

        /** @return the figures (a copy: the record stays as read) */
        @Override
        public UsageFigures figures() {
            return figures.copy();
        }
    }

    /**
     * What one allocation did over {@code [from, to)}. An allocation's intervals follow one another without overlap
     * (each starts where the one before ended), so nothing is counted twice, across sampler restarts too.
     *
     * @param allocationId the allocation
     * @param owner        its owner, where the request named one
     * @param ownerUid     the owner's uid, where the kernel vouched for it
     * @param jobId        its job id
     * @param from         start (the grant, for the first interval)
     * @param to           end (the release, for the last)
     * @param first        whether {@code from} is the grant
     * @param end          why the allocation ended, on its last interval: {@code RELEASED}, {@code EXPIRED},
     *                     {@code RECLAIMED}, {@code UNOBSERVED} (released while no sampler ran: the release fell
     *                     after {@code to}), or {@code GONE} (a pod's or Slurm job's track: a sweep listed none of
     *                     its processes on its GPUs)
     * @param gap          whether nothing sampled the interval (a sampler down or not yet started): held time only,
     *                     and energy where the device's counter bridges it
     * @param idleSince    when the allocation's GPUs last went idle, if they are idle at {@code to}
     * @param devices      one entry per device held
     */
    record Interval(String allocationId, Optional<String> owner, OptionalLong ownerUid, Optional<String> jobId,
            Instant from, Instant to, boolean first, Optional<String> end, boolean gap, Optional<Instant> idleSince,
            List<DeviceUsage> devices) implements AccountingRecord {
        /** Copies the list. */
        public Interval {
            Objects.requireNonNull(allocationId, "allocationId");
            Objects.requireNonNull(owner, "owner");
            Objects.requireNonNull(ownerUid, "ownerUid");
            Objects.requireNonNull(jobId, "jobId");
            Objects.requireNonNull(from, "from");
            Objects.requireNonNull(to, "to");
            Objects.requireNonNull(end, "end");
            Objects.requireNonNull(idleSince, "idleSince");
            devices = List.copyOf(devices);
            if (to.isBefore(from)) {
                throw new IllegalArgumentException("interval of " + allocationId + " ends (" + to + ") before it"
                        + " starts (" + from + ")");
            }
        }

        @Override
        public Instant at() {
            return from;
        }

        /** @return the sum of every device's figures */
        public UsageFigures total() {
            UsageFigures f = new UsageFigures();
            for (DeviceUsage d : devices) {
                f.add(d.figures);
            }
            return f;
        }
    }

    /**
     * Written after each batch of intervals: the allocations still open at {@code at} (each one's intervals end there).
     * A sampler that starts reads back to the last marker to learn where each allocation's record stands.
     *
     * @param at     when the batch ended
     * @param open   the allocations open then
     * @param judged the latest sweep the idle policy had judged once the batch was written (the clock stepped back:
     *               before {@code at}'s sweep, a later one): a restarted policy judges nothing before its clock passes
     *               it, as the one that ran on, whether or not any allocation was live (review50, review52); empty
     *               before the policy's first sweep. Not {@code at}: a stop writes its marker at the clock's time,
     *               which no sweep judged (a clock stepped ahead: reviews 44, 45)
     */
    record Checkpoint(Instant at, List<String> open, Optional<Instant> judged) implements AccountingRecord {
        /** Copies the list. */
        public Checkpoint {
            Objects.requireNonNull(at, "at");
            open = List.copyOf(open);
            Objects.requireNonNull(judged, "judged");
        }

        /**
         * A marker that says nothing of the idle policy.
         *
         * @param at   when the batch ended
         * @param open the allocations open then
         */
        public Checkpoint(Instant at, List<String> open) {
            this(at, open, Optional.empty());
        }
    }

    /**
     * One step of the idle policy, audited: flagged, warned, acted on (or what a dry run would have done), left alone
     * when busy again, or an action that failed or was skipped (with why).
     *
     * @param at           when
     * @param allocationId the allocation
     * @param owner        its owner
     * @param action       what was done
     * @param idleFor      how long its GPUs had been idle
     * @param detail       a sentence: the policy's setting that fired, the hook's exit, the failure
     */
    record IdleAction(Instant at, String allocationId, Optional<String> owner, IdleStep action, Duration idleFor,
            String detail) implements AccountingRecord {
        /** @throws NullPointerException for a null field */
        public IdleAction {
            Objects.requireNonNull(at, "at");
            Objects.requireNonNull(allocationId, "allocationId");
            Objects.requireNonNull(owner, "owner");
            Objects.requireNonNull(action, "action");
            Objects.requireNonNull(idleFor, "idleFor");
            Objects.requireNonNull(detail, "detail");
        }
    }

    /**
     * The idle policy's count for an allocation in an idle stretch, written with each checkpoint after the sweep's
     * policy step, and when the sampler stops: a restarted sampler continues the stretch from it exactly (review42;
     * without one, it derives the count from the stretch's intervals). Compaction drops it.
     *
     * @param at           when it was written (a checkpoint's time, or the stop's)
     * @param allocationId the allocation
     * @param start        where the stretch began, as the policy has it
     * @param idle         the idle time the policy counted in the stretch (the time its sweeps observed)
     * @param sinceWarning the time it counted since its warning, where it warned
     */
    record IdleCount(Instant at, String allocationId, Instant start, Duration idle, Optional<Duration> sinceWarning)
            implements
                AccountingRecord {
        /** @throws NullPointerException for a null field; IllegalArgumentException for a negative time */
        public IdleCount {
            Objects.requireNonNull(at, "at");
            Objects.requireNonNull(allocationId, "allocationId");
            Objects.requireNonNull(start, "start");
            Objects.requireNonNull(idle, "idle");
            Objects.requireNonNull(sinceWarning, "sinceWarning");
            if (idle.isNegative() || sinceWarning.filter(Duration::isNegative).isPresent()) {
                throw new IllegalArgumentException("idle count of " + allocationId + ": negative time");
            }
        }
    }

    /**
     * A day's usage of one owner (all GPUs), or of one GPU (all owners), written by compaction so that reports over
     * long periods read a few rows per day instead of every interval.
     *
     * @param day         the UTC day
     * @param owner       for an owner row: the owner (empty: allocations without one); empty for a GPU row
     * @param ownerUid    the owner's uid, where known (owner rows)
     * @param index       for a GPU row: the device index; empty for an owner row
     * @param uuid        for a GPU row: the device UUID
     * @param allocations allocations granted that day: per owner row, those of the owner; per GPU row, those whose
     *                    first GPU it is (so rows of either kind add up over the day to the day's allocations)
     * @param figures     the day's figures (copied)
     * @param parts       how many devices' figures of the day's records the row sums (at least 1): each had its own
     *                    energy allowance ({@link RecordCodec#plausibleEnergy}), and the row is checked against their
     *                    sum, so a row of plausible records is never refused (review30)
     * @param gpus        for an owner row: the GPU indices its allocations held that day (ascending, at most
     *                    {@link RecordCodec#MAX_DEVICES}); empty for a GPU row, and in a row written before rows
     *                    carried them
     * @param notes       why a figure is missing or estimated: for an owner row, the notes of the devices its
     *                    allocations held that day; for a GPU row, that GPU's (distinct, at most
     *                    {@link RecordCodec#MAX_NOTES}, as an interval's device has): a report reads the same notes
     *                    from a compacted day as from its intervals (review53)
     */
    record DaySummary(LocalDate day, Optional<String> owner, OptionalLong ownerUid, OptionalInt index,
            Optional<String> uuid, long allocations, UsageFigures figures, int parts, List<Integer> gpus,
            List<String> notes) implements AccountingRecord {
        /** Copies the figures and the lists. */
        public DaySummary {
            Objects.requireNonNull(day, "day");
            Objects.requireNonNull(owner, "owner");
            Objects.requireNonNull(ownerUid, "ownerUid");
            Objects.requireNonNull(index, "index");
            Objects.requireNonNull(uuid, "uuid");
            if (parts < 1) {
                throw new IllegalArgumentException("parts: at least 1, was " + parts);
            }
            figures = figures.copy();
            gpus = List.copyOf(gpus);
            notes = List.copyOf(notes);
        }

        /** A row without GPU indices or notes. */
        public DaySummary(LocalDate day, Optional<String> owner, OptionalLong ownerUid, OptionalInt index,
                Optional<String> uuid, long allocations, UsageFigures figures, int parts) {
            this(day, owner, ownerUid, index, uuid, allocations, figures, parts, List.of(), List.of());
        }

        /** A row of one part, without GPU indices or notes. */
        public DaySummary(LocalDate day, Optional<String> owner, OptionalLong ownerUid, OptionalInt index,
                Optional<String> uuid, long allocations, UsageFigures figures) {
            this(day, owner, ownerUid, index, uuid, allocations, figures, 1);
        }

        /** @return whether this is a GPU row (else an owner row) */
        public boolean gpuRow() {
            return index.isPresent();
        }

        @Override
        public Instant at() {
            return day.atStartOfDay().toInstant(ZoneOffset.UTC);
        }

        /** @return the figures (a copy) */
        @Override
        public UsageFigures figures() {
            return figures.copy();
        }
    }
}
