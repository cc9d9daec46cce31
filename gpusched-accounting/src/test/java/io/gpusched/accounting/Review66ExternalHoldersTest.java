package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/**
 * Review 66: review64's fix to a restarted sampler's 5-minute bound (ExternalHolders.sweep: "for what is left of the
 * bound ... since its last record"), with several open tracks on one GPU.
 *
 * <p>docs/ACCOUNTING.md, "Kubernetes": a restarted sampler carries a track whose last record ended within 5 minutes
 * "until a source answers or what is left of the 5 minutes since that record ended runs out". The bound is the
 * track's: since its own last record. The fix merges each resumed track's time since its record into ONE counter per
 * GPU with {@code Math::max}: the track whose record ended earliest sets the budget of every track on that GPU. Two
 * Slurm jobs sharing a GPU (shards, MPS), one whose last record is the checkpoint 4 minutes before the restart, the
 * other whose last record ended 10 s before it (written at once when it turned busy, a record its last sweep shows it
 * answered for on a GPU that listed): the second is dropped 1 minute after the restart, 3 min 50 s before what is left
 * of its bound runs out, and its time on the GPU from then on is charged to nobody. Its record is evidence that the
 * GPU listed and a source answered 10 s before the restart, yet it is counted from the other job's older record.
 */
class Review66ExternalHoldersTest {
    private static final Instant RESTART = Instant.parse("2026-03-02T10:00:00Z");

    private static GpuDevice gpu(int index) {
        return GpuDevice.builder().index(index).uuid("GPU-" + index).vendor(GpuVendor.NVIDIA).name("sim")
                .memory(MemorySize.ofMebibytes(81_920)).pciBusId("0000:0" + index + ":00.0").build();
    }

    private static Interval tail(String id, String owner, String job, Instant from, Instant to) {
        UsageFigures f = new UsageFigures();
        return new Interval(id, Optional.of(owner), OptionalLong.of(1000), Optional.of(job), from, to, false,
                Optional.empty(), false, Optional.empty(),
                List.of(new DeviceUsage(0, "GPU-0", f, OptionalLong.empty(), List.of())));
    }

    @Test
    void eachResumedTrackOnOneGpuKeepsWhatIsLeftOfItsOwnBound() {
        GpuDevice d0 = gpu(0);
        ExternalHolders h = new ExternalHolders(ProcessAttribution.none());
        // two Slurm jobs' open tracks on GPU 0, as the killed sampler left them: job 11's last record is the
        // checkpoint 240 s before the restart; job 12's ended 10 s before it (its process answered for, the GPU
        // listed: no carried: note)
        h.resume(List.of(
                tail("slurm-job:11@1", "alice", "11", RESTART.minusSeconds(300), RESTART.minusSeconds(240)),
                tail("slurm-job:12@2", "bob", "12", RESTART.minusSeconds(60), RESTART.minusSeconds(10))));
        List<String> heldAt120 = new ArrayList<>();
        List<String> heldAtRestart = new ArrayList<>();
        // GPU 0 cannot be listed from the restart on; a sweep every 10 s
        for (int s = 0; s <= 120; s += 10) {
            List<Allocation> out = h.sweep(RESTART.plusSeconds(s), List.of(d0), List.of(),
                    d -> Optional.<ProcessUsageSample>empty());
            for (Allocation a : out) {
                if (s == 0) {
                    heldAtRestart.add(a.id());
                }
                if (s == 120) {
                    heldAt120.add(a.id());
                }
            }
        }
        assertThat(heldAtRestart).as("precondition: both tracks are carried at the restart's first sweep")
                .containsExactlyInAnyOrder("slurm-job:11@1", "slurm-job:12@2");
        assertThat(heldAt120).as("120 s after the restart job 12's last record ended 130 s ago: within its 5 minutes"
                + " (what is left of them runs out 290 s after the restart), so it is still carried on GPU 0 (job"
                + " 11's, from 240 s before, may be gone); expected slurm-job:12@2 among the holders, got %s: the"
                + " per-GPU counter took job 11's older record (Math::max) as every track's", heldAt120)
                .contains("slurm-job:12@2");
    }
}
