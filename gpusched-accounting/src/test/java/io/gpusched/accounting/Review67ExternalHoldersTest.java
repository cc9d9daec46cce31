package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.UsageOwner;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/**
 * Review 67: review66's per-track budget of a restarted sampler (ExternalHolders.sinceRecord), for a track on two GPUs.
 *
 * <p>docs/ACCOUNTING.md, "Pods and Slurm jobs in the store": a GPU whose processes cannot be listed keeps its holders
 * "for at most 5 minutes of sweeps (counted per GPU ...)"; a restarted sampler continues a track on a GPU its first
 * sweep cannot list "until a source answers or what is left of the 5 minutes since that record ended runs out ...
 * (after a kill the last record is the last checkpoint, and no sampler saw whether a source answered after it: that
 * time counts as without an answer): a restart never starts the bound over".
 *
 * <p>The budget is dropped for the whole track (sinceRecord.retainAll(unconfirmed)) as soon as a source answers for the
 * track on ANY GPU. Slurm job 11 held GPUs 0 and 1; the killed sampler's last record (its last checkpoint) ended 280 s
 * before the restart. After the restart GPU 0 cannot be listed; GPU 1 lists and the Slurm source answers for the job's
 * process there. An answer on GPU 1 says nothing about GPU 0 (as review66 said of another track's record: no
 * evidence about this one), yet GPU 0 is then kept for a full 5 minutes counted from the restart: 580 s of time no
 * sampler saw GPU 0 listed, charged to job 11 as held. The restart started GPU 0's bound over.
 */
class Review67ExternalHoldersTest {
    private static final Instant RESTART = Instant.parse("2026-03-02T10:00:00Z");

    private static GpuDevice gpu(int index) {
        return GpuDevice.builder().index(index).uuid("GPU-" + index).vendor(GpuVendor.NVIDIA).name("sim")
                .memory(MemorySize.ofMebibytes(81_920)).pciBusId("0000:0" + index + ":00.0").build();
    }

    @Test
    void anAnswerOnAnotherGpuDoesNotStartAnUnlistedGpusBoundOver() {
        GpuDevice d0 = gpu(0);
        GpuDevice d1 = gpu(1);
        UsageOwner job11 = new UsageOwner(UsageOwner.Kind.SLURM_JOB, "11", Map.of("user", "alice", "uid", "1000"));
        ProcessAttribution slurm = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                return pid == 500 ? Optional.of(job11) : Optional.empty();
            }

            @Override
            public boolean namesOthers() {
                return true;
            }
        };
        ExternalHolders h = new ExternalHolders(slurm);
        // the killed sampler's last record of job 11 (its last checkpoint): GPUs 0 and 1, both held by an answer (no
        // carried: note), ended 280 s before the restart
        h.resume(List.of(new Interval("slurm-job:11@1", Optional.of("alice"), OptionalLong.of(1000), Optional.of("11"),
                RESTART.minusSeconds(340), RESTART.minusSeconds(280), false, Optional.empty(), false,
                Optional.empty(), List.of(new DeviceUsage(0, "GPU-0", new UsageFigures(), OptionalLong.empty(),
                        List.of()),
                        new DeviceUsage(1, "GPU-1", new UsageFigures(), OptionalLong.empty(),
                                List.of())))));
        List<Integer> gpusAtRestart = new ArrayList<>();
        List<Integer> gpusAt120 = new ArrayList<>();
        for (int s = 0; s <= 120; s += 10) {
            Instant now = RESTART.plusSeconds(s);
            // GPU 0 cannot be listed from the restart on; GPU 1 lists job 11's process 500, which the source answers for
            List<Allocation> out = h.sweep(now, List.of(d0, d1), List.of(), d -> d.index() == 0
                    ? Optional.<ProcessUsageSample>empty()
                    : Optional.of(new ProcessUsageSample(now, List.of(new GpuProcessUsage(500, OptionalDouble.of(60),
                            Optional.of(MemorySize.ofMebibytes(1024)))), Optional.empty(), Optional.empty())));
            for (Allocation a : out) {
                if (a.id().equals("slurm-job:11@1")) {
                    for (GpuDevice d : a.devices()) {
                        (s == 0 ? gpusAtRestart : s == 120 ? gpusAt120 : new ArrayList<Integer>()).add(d.index());
                    }
                }
            }
        }
        assertThat(gpusAtRestart).as("precondition: the restart's first sweep continues job 11 on GPU 0 (unlisted,"
                + " 280 s of its 5 minutes gone) and GPU 1 (answered)").containsExactly(0, 1);
        assertThat(gpusAt120).as("120 s after the restart, GPU 0 has gone 400 s (280 s before the restart, which count"
                + " as without an answer, + 120 s unlisted since) with no sampler seeing it listed: past the 5 minutes,"
                + " so job 11 must hold GPU 1 only; it still holds %s: the source's answer on GPU 1 cleared the track's"
                + " time since its record and GPU 0's bound started over at the restart (kept until 300 s after it)",
                gpusAt120).containsExactly(1);
    }
}
