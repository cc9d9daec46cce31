package io.gpusched.accounting.adversarial.review68;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 68. docs/ACCOUNTING.md, "Pods and Slurm jobs in the store": a GPU whose processes cannot be listed keeps its
 * pod "for at most 5 minutes of sweeps"; review64 made a sweep the clock jumped ahead for skip the pass over pods'
 * GPUs. Here pod ml/train was answered for on GPU 1 for 60 s, then GPU 1 stopped listing processes (kept, without an
 * answer, within the bound: 80 s of it gone). The clock then steps 1 h ahead and stays there (an NTP correction). The
 * jumped sweep is skipped; at the next one ExternalHolders counts at most 60 s of the step, so the pod is still within
 * its bound and carried, and the meter turns the hour from its last credited sweep into a gap (held, not sampled): the
 * pod is charged over an hour of GPU 1 that no source ever said it held, twelve times the bound. A gpusched allocation
 * is held across such a gap by its grant; a carried pod is held by nothing but the bound.
 */
class CarriedPodAcrossAClockThatStaysAheadTest {
    private static final Duration STEP = Duration.ofSeconds(10);
    private static final int GPU = 1;

    @TempDir
    Path dir;

    @Test
    void aPodKeptWithoutAnAnswerIsNotChargedTheHourAClockStepAheadSkipped() {
        UsageOwner pod = new UsageOwner(UsageOwner.Kind.POD, "ml/train", Map.of("namespace", "ml", "pod", "train",
                "container", "main", "resource", "nvidia.com/gpu"));
        ProcessAttribution podResources = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                return pid == 101 ? Optional.of(pod) : Optional.empty();
            }

            @Override
            public boolean namesOthers() {
                return true;
            }
        };
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1));
        try (AccountingNode n = new AccountingNode(dir.resolve("node"), settings,
                podResources.orElse(ProcessAttribution.none()))) {
            n.inventory.setProcessTraces(GPU, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 6); // T0 .. T0 + 60 s: listed and answered for
            n.inventory.setProcessTraces(GPU, Map.of()); // GPU 1 lists no processes from now on
            n.run(STEP, 8); // to T0 + 140 s: kept without an answer, 80 s of the bound gone
            n.clock.advance(Duration.ofHours(1)); // the clock steps 1 h ahead ...
            n.sweep(); // a jump: skipped
            n.run(STEP, 40); // ... and stays there
            n.stopSampler();
        }
        List<Interval> track = new ArrayList<>();
        AccountingStore store = AccountingStore.at(dir.resolve("node"));
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith("pod:ml/train@")) {
                    track.add(iv);
                }
            }, new ArrayList<>());
        }
        long held = track.stream().flatMap(iv -> iv.devices().stream()).mapToLong(x -> x.figures().heldMillis())
                .sum();
        assertThat(track).as("precondition: the pod was recorded").isNotEmpty();
        assertThat(held).as("pod ml/train was answered for on GPU 1 for about 60 s, then kept there without an answer"
                + " for at most the 5-minute bound: expected at most about 70 + 300 s held (400 s with slack); it is"
                + " charged %d s (intervals %s): the hour the clock stepped ahead, which no source answered for, is"
                + " held time of a pod kept only by the bound", held / 1000,
                track.stream().map(iv -> iv.from() + ".."
                        + iv.to() + " " + iv.devices().get(0).figures().heldMillis() / 1000 + " s " + iv.devices()
                                .get(0).notes())
                        .toList())
                .isLessThanOrEqualTo(400_000L);
    }
}
