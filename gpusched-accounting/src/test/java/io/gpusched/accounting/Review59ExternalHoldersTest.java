package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 59: pods and Slurm jobs metered as holders of the GPUs no allocation holds (ExternalHolders), against the
 * scripted node of ExternalHoldersTest: what the script implies vs what the store and the reports say.
 */
class Review59ExternalHoldersTest {
    private static final Instant T0 = AccountingNode.T0;
    private static final Duration STEP = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    private final Map<Integer, UsageOwner> owners = new ConcurrentHashMap<>();

    private final ProcessAttribution source = new ProcessAttribution() {
        @Override
        public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
            return Optional.ofNullable(owners.get(pid));
        }

        @Override
        public boolean namesOthers() {
            return true;
        }
    };

    private static UsageOwner pod(String ns, String name) {
        return new UsageOwner(UsageOwner.Kind.POD, ns + "/" + name, Map.of("namespace", ns, "pod", name,
                "container", "main", "resource", "nvidia.com/gpu"));
    }

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private AccountingNode node() {
        return new AccountingNode(dir, settings(), source.orElse(ProcessAttribution.none()));
    }

    private static UsageReport.Row row(UsageReport r, String key) {
        return r.rows().stream().filter(x -> x.key().equals(key)).findFirst().orElseThrow(() -> new AssertionError(
                "expected a row " + key + " in " + r.rows().stream().map(UsageReport.Row::key).toList()));
    }

    private List<String> trackIds(String prefix) {
        return trackIds(dir, prefix);
    }

    private static List<String> trackIds(Path state, String prefix) {
        List<String> ids = new ArrayList<>();
        AccountingStore store = AccountingStore.at(state);
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith(prefix)
                        && !ids.contains(iv.allocationId())) {
                    ids.add(iv.allocationId());
                }
            }, new ArrayList<>());
        }
        return ids;
    }

    // a namespace is a DNS label (at most 63 characters), a pod name a DNS subdomain (at most 253): both legal
    private static final String LONG_NS = "n".repeat(63);
    private static final String LONG_POD_A = "p".repeat(252) + "a";
    private static final String LONG_POD_B = "p".repeat(252) + "b";

    private void meterTwoLongPods() {
        owners.put(101, pod(LONG_NS, LONG_POD_A));
        owners.put(201, pod(LONG_NS, LONG_POD_B));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 80)));
            n.inventory.setProcessTraces(1, Map.of(201, UsageTrace.of(STEP, 0)));
            n.sweep();
            n.run(STEP, 12); // 2 min
        }
    }

    /**
     * Two legal pods whose {@code <namespace>/<pod>} (317 characters) share their first 256 characters: the job id a
     * pod's track is recorded with is cut to GpuRequest.MAX_JOB_ID_LENGTH (256), and --by pod keys rows by the job id,
     * so the two pods are reported as one row: one pod's 80 % and the other's idle GPU are merged.
     */
    @Test
    void twoPodsWithLongNamesAreTwoRowsByPod() {
        meterTwoLongPods();
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        List<String> keys = byPod.rows().stream().map(UsageReport.Row::key).filter(k -> !k.isEmpty()).toList();
        assertThat(keys).as("two different pods (legal Kubernetes names) must be two rows of --by pod, each keyed"
                + " by its full <namespace>/<pod>").containsExactlyInAnyOrder(LONG_NS + "/" + LONG_POD_A,
                        LONG_NS + "/" + LONG_POD_B);
    }

    /**
     * docs: "gpusched report <namespace>/<pod> ... shows one". A pod with a long (legal) name is recorded under a
     * job id cut to 256 characters, so its full name finds nothing (and the cut name finds two pods).
     */
    @Test
    void aPodWithALongNameIsFoundByReportId() {
        meterTwoLongPods();
        List<String> ids = AllocationUsage.allocationsOfJob(AccountingStore.at(dir), LONG_NS + "/" + LONG_POD_A, 10);
        assertThat(ids).as("`gpusched report <namespace>/<pod>` must find the pod's one track").hasSize(1);
        assertThat(ids.get(0)).startsWith("pod:" + LONG_NS + "/" + LONG_POD_A + "@");
    }

    /**
     * A pod on two GPUs whose process on GPU 1 ends 20 s in (a sweep later the list reads another, unattributed
     * process there), before the first checkpoint: the track's allocation is replaced by one on GPU 0 only and the
     * meter's Track.update drops the open figures of GPU 1, so the 20 s the pod held GPU 1 are in no record.
     */
    @Test
    void aPodThatLeavesOneOfItsGpusKeepsTheTimeItHeldIt() {
        owners.put(101, pod("ml", "train"));
        owners.put(102, pod("ml", "train"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 50)));
            n.inventory.setProcessTraces(1, Map.of(102, UsageTrace.of(STEP, 50)));
            n.sweep(); // T0
            n.run(STEP, 2); // T0 + 20 s: the pod on GPUs 0 and 1
            n.inventory.setProcessTraces(1, Map.of(999, UsageTrace.of(STEP, 30))); // its GPU-1 process ends
            n.run(STEP, 16); // T0 + 180 s
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        UsageReport.Row train = row(byPod, "ml/train");
        assertThat(train.devices()).as("the pod held GPUs 0 and 1 (GPU 1 from T0 to T0 + 20 s)")
                .containsExactly(0, 1);
        assertThat(train.figures().heldMillis()).as("GPU 0 for 180 s and GPU 1 for 20 s (first sweep listed to"
                + " last sweep listed, as the docs define a pod's hold)").isEqualTo(200_000);
        UsageReport byDevice = UsageReport.of(AccountingStore.at(dir), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.DEVICE);
        assertThat(row(byDevice, "1").figures().heldMillis()).as("GPU 1 was held by the pod for 20 s")
                .isEqualTo(20_000);
    }

    /**
     * docs: "A GPU whose process list cannot be read keeps its holders for that sweep" and "a restarted sampler
     * continues the open track of a pod still there". A restarted sampler whose first sweep cannot read the pod's
     * GPU's list forgets the resumed track (ExternalHolders.resumed is cleared by that sweep, and the kept holders
     * come from a previous sweep it never had): the pod, still there, gets a second track, and `gpusched report
     * ml/train` is then refused as a pod seen in several tracks.
     */
    @Test
    void aRestartWhoseFirstSweepCannotListTheGpuContinuesThePodsTrack() {
        owners.put(101, pod("ml", "train"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 9); // T0 + 90 s
            n.restartSampler();
            n.inventory.setProcessTraces(0, Map.of()); // the simulated backend cannot list GPU 0 for one sweep
            n.run(STEP, 1); // T0 + 100 s
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.run(STEP, 8); // T0 + 180 s
        }
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod that never left, across a restart whose first"
                + " sweep could not read its GPU's process list").hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }

    /**
     * docs: "A GPU whose process list cannot be read keeps its holders for that sweep, not measured". NVML's
     * processUsage does not answer a device fault (or a device not reached) with an empty Optional but with a sample
     * of no processes whose figures are "not measured", naming the error (NvmlInventory.processUsage). ExternalHolders
     * takes that for "listed, nobody there": one failed read ends the pod's track, and the next sweep starts another,
     * so a pod that never left is two tracks (`gpusched report ml/train` refused) and the failed sweep's 10 s are lost.
     */
    @Test
    void aFaultedProcessListAsNvmlReportsItKeepsThePod(@TempDir Path other) {
        owners.put(101, pod("ml", "train"));
        boolean[] fault = {false};
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            GpuInventory nvmlLike = new GpuInventory() {
                @Override
                public String backend() {
                    return n.inventory.backend();
                }

                @Override
                public List<GpuDevice> devices() {
                    return n.inventory.devices();
                }

                @Override
                public GpuTopology topology() {
                    return n.inventory.topology();
                }

                @Override
                public GpuSample sample() {
                    return n.inventory.sample();
                }

                @Override
                public Optional<ProcessUsageSample> processUsage(GpuDevice device) {
                    if (fault[0] && device.index() == 0) {
                        // as NvmlInventory answers a fault of the device: no processes, both figures not measured
                        String why = "NVML_ERROR_UNKNOWN (999) from nvmlDeviceGetComputeRunningProcesses_v3";
                        return Optional.of(new ProcessUsageSample(n.clock.instant(), List.of(), Optional.of(why),
                                Optional.of(why)));
                    }
                    return n.inventory.processUsage(device);
                }

                @Override
                public void close() {
                }
            };
            AccountingSampler s = AccountingSampler.open(AccountingStore.at(other), settings(), nvmlLike,
                    source.orElse(ProcessAttribution.none()), new HostIdleEffects(n.scheduler), n.clock).orElseThrow();
            try {
                s.sweep(nvmlLike.sample(), List.of()); // T0
                for (int i = 0; i < 9; i++) { // to T0 + 90 s
                    n.clock.advance(STEP);
                    s.sweep(nvmlLike.sample(), List.of());
                }
                fault[0] = true; // one sweep (T0 + 100 s) cannot read GPU 0's processes
                n.clock.advance(STEP);
                s.sweep(nvmlLike.sample(), List.of());
                fault[0] = false;
                for (int i = 0; i < 8; i++) { // to T0 + 180 s
                    n.clock.advance(STEP);
                    s.sweep(nvmlLike.sample(), List.of());
                }
            } finally {
                s.close();
            }
        }
        assertThat(trackIds(other, "pod:ml/train@")).as("a GPU whose process list cannot be read (NVML's answer to a"
                + " device fault) keeps its pods: one track for a pod that never left").hasSize(1);
        UsageReport byPod = UsageReport.of(AccountingStore.at(other), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        assertThat(row(byPod, "ml/train").figures().heldMillis()).as("held from T0 to T0 + 180 s (the failed"
                + " sweep's time held, not measured)").isEqualTo(180_000);
    }

    /**
     * A pod whose process ends while the sampler runs and sees it go: its track is ended as {@code UNOBSERVED}, which
     * the documented format defines as "released while no sampler ran" (docs/ACCOUNTING.md, the {@code i} record), and
     * `gpusched report ml/notebook` prints "unobserved ..." for an end the sampler observed at a sweep.
     */
    @Test
    void aPodThatTheSamplerSawLeaveIsNotRecordedAsEndedWhileNoSamplerRan() {
        owners.put(101, pod("ml", "train"));
        owners.put(201, pod("ml", "notebook"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60), 201, UsageTrace.of(STEP, 0)));
            n.sweep();
            n.run(STEP, 12); // T0 + 2 min
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60))); // the notebook's kernel exits
            n.run(STEP, 6); // T0 + 3 min: every sweep ran and saw it
        }
        List<Optional<String>> ends = new ArrayList<>();
        AccountingStore store = AccountingStore.at(dir);
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith("pod:ml/notebook@")
                        && iv.end().isPresent()) {
                    ends.add(iv.end());
                }
            }, new ArrayList<>());
        }
        assertThat(ends).as("the notebook's track ended once").hasSize(1);
        assertThat(ends.get(0)).as("ended at a sweep that saw it go, not 'released while no sampler ran'")
                .isNotEqualTo(Optional.of("UNOBSERVED"));
    }
}
