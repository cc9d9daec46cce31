package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.ProcessAttribution;
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
 * Review 61: pods and Slurm jobs metered as holders of the GPUs no allocation holds (ExternalHolders), after
 * review60's fixes (e928972b): the 5-minute bound on a GPU whose process list cannot be read
 * (ExternalHolders.MAX_UNLISTED_MILLIS), against restarts, clock steps and pods on several GPUs.
 *
 * <p>docs/ACCOUNTING.md, "Pods and Slurm jobs in the store": "A GPU whose process list cannot be read (...) keeps its
 * holders, not measured, for at most 5 minutes; then they end." and "a restarted sampler continues the open track of
 * a pod still there".
 */
class Review61ExternalHoldersTest {
    private static final Instant T0 = AccountingNode.T0;
    private static final Duration STEP = Duration.ofSeconds(10);
    private static final long BOUND_S = ExternalHolders.MAX_UNLISTED_MILLIS / 1000;

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

    private List<Interval> intervals(String prefix) {
        List<Interval> out = new ArrayList<>();
        AccountingStore store = AccountingStore.at(dir);
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith(prefix)) {
                    out.add(iv);
                }
            }, new ArrayList<>());
        }
        return out;
    }

    private List<String> trackIds(String prefix) {
        return intervals(prefix).stream().map(Interval::allocationId).distinct().toList();
    }

    /**
     * The 5-minute bound lives only in the sampler's memory (ExternalHolders.unlistedSince): a restarted sampler
     * resumes the pod's open track on the GPU that still cannot be listed and starts the bound over. `gpusched run`
     * is the node's sampler only while its job runs (RunSampler, a new AccountingSampler per run), so on a node where
     * jobs come and go more often than every 5 minutes, a GPU that fell off the bus holds the pod that last used it
     * for ever. Here: listed to T0 + 60 s, unlisted from T0 + 70 s, the sampler restarted at T0 + 4 min; the pod is
     * still held at T0 + 9 min, 8 minutes after its GPU last listed anything.
     */
    @Test
    void aRestartDoesNotStartTheFiveMinuteBoundOver() {
        owners.put(101, pod("ml", "train"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 6); // T0 + 60 s: the pod's process is listed on GPU 0
            n.inventory.setProcessTraces(0, Map.of()); // from now on GPU 0 answers no per-process figures at all
            n.run(STEP, 18); // to T0 + 240 s: unlisted since T0 + 70 s, within the bound
            n.restartSampler(); // a `gpusched run` ends, another starts
            n.run(STEP, 42); // to T0 + 660 s
        }
        List<Interval> track = intervals("pod:ml/train@");
        assertThat(track.stream().map(Interval::allocationId).distinct()).hasSize(1);
        Interval last = track.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("expected the pod's track to end (GONE) once its GPU had not listed for 5"
                        + " minutes, restart or not; it never ended: " + track));
        assertThat(last.end()).contains("GONE");
        assertThat(last.to()).as("kept from its first unlisted sweep (T0 + 70 s) for at most the bound (%d s), not"
                + " for the bound again from the restart (T0 + 250 s)", BOUND_S)
                .isBeforeOrEqualTo(T0.plusSeconds(70 + BOUND_S));
    }

    /**
     * The bound is kept per pod, not per GPU: a pod with a process listed on another GPU clears it
     * (unlistedSince.remove when owners has the key) at every sweep, so its GPU that fell off the bus (never lists
     * again) stays the pod's, "not measured", for as long as the pod runs: the pod is charged two GPUs for an hour
     * though one of them had no process listed for 59 minutes, and `--by pod` / `report ml/train` count it.
     */
    @Test
    void aGpuThatNeverListsAgainIsDroppedWithinTheBoundWhileThePodsOtherGpuLists() {
        owners.put(101, pod("ml", "train"));
        owners.put(102, pod("ml", "train"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.inventory.setProcessTraces(1, Map.of(102, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 6); // T0 + 60 s: a process of the pod on GPU 0 and on GPU 1
            n.inventory.setProcessTraces(1, Map.of()); // GPU 1 falls off the bus: no per-process answer from now
            n.run(STEP, 354); // to T0 + 1 h
        }
        List<String> ids = trackIds("pod:ml/train@");
        assertThat(ids).hasSize(1);
        AllocationUsage u = AllocationUsage.find(AccountingStore.at(dir), ids.get(0)).orElseThrow();
        AllocationUsage.Device gpu1 = u.devices().stream().filter(d -> d.index() == 1).findFirst().orElseThrow(
                () -> new AssertionError("expected GPU 1 among the pod's devices: " + u.devices()));
        assertThat(gpu1.figures().heldMillis()).as("GPU 1 listed the pod's process up to T0 + 60 s and nothing from"
                + " T0 + 70 s: the pod holds it at most until T0 + 70 s + %d s, not for the hour its other GPU ran",
                BOUND_S).isLessThanOrEqualTo((70 + BOUND_S) * 1000);
    }

    /**
     * A clock stepped back while a GPU's list cannot be read ends its holders at once ({@code t < since} in
     * ExternalHolders.sweep), though not 5 minutes but one sweep has passed unlisted. The pod that never left is split
     * into two tracks (the second starts, at the stepped-back time, before the first one's last sweep), so
     * `gpusched report ml/train` is refused as a pod seen in several tracks.
     */
    @Test
    void aClockSteppedBackDuringOneUnlistedSweepDoesNotEndThePod() {
        owners.put(101, pod("ml", "train"));
        try (AccountingNode n = node()) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(STEP, 6); // T0 + 60 s: listed
            n.inventory.setProcessTraces(0, Map.of()); // one failed listing
            n.run(STEP, 1); // T0 + 70 s: unlisted, kept (the bound starts)
            n.clock.set(T0.plusSeconds(68)); // NTP steps the clock back 2 s
            n.sweep(); // still unlisted: 0 s past the bound's start, as far as anyone can tell
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60))); // lists again
            n.run(STEP, 12); // to T0 + 188 s
        }
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod whose GPU missed one listing while the clock"
                + " was stepped back 2 s").hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }

    /**
     * "a restarted sampler continues the open track of a pod still there" (docs/ACCOUNTING.md, "Pods and Slurm jobs in
     * the store"). PodResourcesAttribution answers nothing until the kubelet has answered once (holdersOf: no list, no
     * holder; a running source keeps its last list for a minute, a fresh one has none), which is how a sampler
     * restarted while the kubelet restarts (both restarted by one node maintenance, or gpusched's service up before
     * the kubelet) sees its first sweep. ExternalHolders then drops the store's open track of the pod, whose process
     * never left the GPU: the meter ends it UNOBSERVED ("released while no sampler ran"), the 20 s up to the next
     * sweep the kubelet answers are charged to nobody, and the pod becomes two tracks, so `gpusched report ml/train`
     * is refused as a pod seen in several. A GPU whose list cannot be read keeps the resumed track (review59); one
     * whose processes cannot be attributed yet at the first sweep does not.
     */
    @Test
    void aRestartWhoseFirstSweepFindsTheKubeletNotYetAnsweringContinuesThePodsTrack() {
        boolean[] kubeletUp = {true};
        ProcessAttribution podResources = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                return kubeletUp[0] ? Optional.ofNullable(owners.get(pid)) : Optional.empty();
            }

            @Override
            public boolean namesOthers() {
                return true;
            }
        };
        owners.put(101, pod("ml", "train"));
        try (AccountingNode n = new AccountingNode(dir, settings(), podResources.orElse(ProcessAttribution.none()))) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60))); // runs throughout
            n.sweep();
            n.run(STEP, 9); // T0 + 90 s
            n.restartSampler();
            kubeletUp[0] = false; // the kubelet restarting: no list yet
            n.run(STEP, 1); // T0 + 100 s: the restarted sampler's first sweep
            kubeletUp[0] = true;
            n.run(STEP, 8); // T0 + 180 s
        }
        List<Interval> track = intervals("pod:ml/train@");
        assertThat(track).as("the pod never left GPU 0: its track is not ended as released while no sampler ran")
                .allSatisfy(iv -> assertThat(iv.end()).as(iv.allocationId()).isEmpty());
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod whose process ran on GPU 0 throughout, across a"
                + " restart whose first sweep the kubelet did not answer").hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }
}
