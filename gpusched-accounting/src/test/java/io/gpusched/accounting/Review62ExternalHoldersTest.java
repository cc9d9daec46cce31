package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.testing.ManualClock;
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
 * Review 62: pods and Slurm jobs as holders of GPUs no allocation holds (ExternalHolders), after review61's fixes
 * (6a33a8de), on a MIG partition.
 *
 * <p>A restarted sampler carries the store's open track of a pod on a GPU its first sweep cannot list, or whose
 * processes no source answers for yet, "only when the track's last record measured that GPU". ExternalHolders.sweep
 * tests "measured" as {@code utilizationMillis() > 0}; on a MIG partition utilization is never measured (NVML has no
 * per-process or per-device utilization there: UsageFigures, "none on MIG"), so a pod's record of a MIG partition it
 * ran on throughout reads as "not measured" and the restarted sampler drops its track: the pod that never left is
 * split in two, and {@code gpusched report ns/pod} refuses a pod seen in several tracks. The memory figure (and
 * {@code measuredMillis}) says the partition was measured.
 */
class Review62ExternalHoldersTest {
    private static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");
    private static final Duration STEP = Duration.ofSeconds(10);
    private static final int MIG = 0;
    private static final int WHOLE = 1;
    private static final long BOUND_S = ExternalHolders.MAX_UNLISTED_MILLIS / 1000;

    @TempDir
    Path dir;

    private final Map<Integer, UsageOwner> owners = new ConcurrentHashMap<>();
    private final boolean[] kubeletUp = {true};

    /** PodResources as it answers: nothing while the kubelet is down. */
    private final ProcessAttribution podResources = new ProcessAttribution() {
        @Override
        public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
            return kubeletUp[0] ? Optional.ofNullable(owners.get(pid)) : Optional.empty();
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

    private static UsageTrace migProcess() {
        // utilization is ignored on a MIG partition (not measured); memory is measured
        return new UsageTrace(STEP, List.of(50.0), List.of(MemorySize.ofGibibytes(5)), List.of());
    }

    /** A node whose GPU 0 is a MIG partition and GPU 1 a whole A100, with a sampler that can be restarted. */
    private final class MigNode implements AutoCloseable {
        final ManualClock clock = new ManualClock(T0);
        final SimulatedGpuInventory inventory;
        final GpuScheduler scheduler;
        final AccountingStore store;
        final AccountingSettings settings;
        final ProcessAttribution attribution = podResources.orElse(ProcessAttribution.none());
        AccountingSampler sampler;

        MigNode() {
            this(Duration.ofMinutes(1));
        }

        MigNode(Duration checkpoint) {
            settings = AccountingSettings.defaults().withCheckpoint(checkpoint);
            SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review62").clock(clock)
                    .energyCounters(true);
            b.device(GpuDevice.builder().index(0).uuid("MIG-review62-0").vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100 MIG 3g.20gb").memory(MemorySize.ofGibibytes(20))
                    .pciBusId("00000000:00:00.0").parentUuid("GPU-review62-parent").build());
            b.device(GpuDevice.builder().index(1).uuid("GPU-review62-1").vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:01:00.0").build());
            inventory = b.build();
            scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                    .maintenanceInterval(Duration.ZERO).build();
            store = AccountingStore.at(dir);
            start();
        }

        void start() {
            sampler = AccountingSampler.open(store, settings, inventory, attribution,
                    new HostIdleEffects(scheduler), clock).orElseThrow();
            scheduler.addListener(sampler);
            sampler.knownLive(scheduler.allocations());
        }

        void restart() {
            scheduler.removeListener(sampler);
            sampler.close();
            start();
        }

        void sweep() {
            sampler.sweep(inventory.sample(), scheduler.allocations());
        }

        void run(int n) {
            for (int i = 0; i < n; i++) {
                clock.advance(STEP);
                sweep();
            }
        }

        @Override
        public void close() {
            sampler.close();
            scheduler.close();
            inventory.close();
        }
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
     * Review61's kubelet case (a sampler restarted while the kubelet restarts), on a MIG partition: the pod's process
     * runs on it throughout; the restarted sampler's first sweep finds it but no source answers yet. On a whole GPU the
     * open track continues (Review61ExternalHoldersTest); on the MIG partition it is ended GONE and a second track
     * starts when the kubelet answers.
     */
    @Test
    void aRestartWhoseFirstSweepFindsTheKubeletNotYetAnsweringContinuesAPodsTrackOnAMigPartition() {
        owners.put(101, pod("ml", "train"));
        try (MigNode n = new MigNode()) {
            n.inventory.setProcessTraces(MIG, Map.of(101, migProcess())); // runs throughout
            n.sweep();
            n.run(9); // T0 + 90 s
            n.restart();
            kubeletUp[0] = false; // the kubelet restarting: no list yet
            n.run(1); // T0 + 100 s: the restarted sampler's first sweep
            kubeletUp[0] = true;
            n.run(8); // T0 + 180 s
        }
        List<Interval> track = intervals("pod:ml/train@");
        assertThat(track).as("the pod was recorded on the MIG partition").isNotEmpty();
        assertThat(track).as("the pod never left the MIG partition: its track is not ended across the restart")
                .allSatisfy(iv -> assertThat(iv.end()).as(iv.allocationId() + " " + iv.from() + ".." + iv.to())
                        .isEmpty());
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod whose process ran on the MIG partition"
                + " throughout, across a restart whose first sweep the kubelet did not answer (as on a whole GPU)")
                .hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }

    /**
     * Review59's case (a GPU whose list cannot be read at a restarted sampler's first sweep keeps the store's open
     * track), on a MIG partition: its one failed listing at the first sweep ends the pod's track, and the next sweep,
     * which lists the pod's process again, starts another.
     */
    @Test
    void aMigPartitionUnlistedAtARestartedSamplersFirstSweepKeepsThePodsTrack() {
        owners.put(101, pod("ml", "train"));
        try (MigNode n = new MigNode()) {
            n.inventory.setProcessTraces(MIG, Map.of(101, migProcess()));
            n.sweep();
            n.run(9); // T0 + 90 s
            n.restart();
            n.inventory.setProcessTraces(MIG, Map.of()); // one failed listing: no per-process answer
            n.run(1); // T0 + 100 s: the restarted sampler's first sweep
            n.inventory.setProcessTraces(MIG, Map.of(101, migProcess())); // lists again
            n.run(8); // T0 + 180 s
        }
        assertThat(intervals("pod:ml/train@")).as("the pod was recorded on the MIG partition").isNotEmpty();
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod whose MIG partition missed one listing at a"
                + " restarted sampler's first sweep (a whole GPU keeps the open track: review59)").hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }

    /**
     * The 5 minutes a restarted sampler keeps a track whose GPU lists processes no source answers for
     * (ExternalHolders.unconfirmed) start over at every restart, which review61 fixed for a GPU that cannot be listed
     * but not for this path: while the track is kept, its GPU's list is read, so the meter records the pod's
     * utilization there (0 %: none of the listed processes is the pod's) and the track's last record "measured" that
     * GPU; the next restarted sampler carries it again, unconfirmed, for 5 more minutes. Here the pod's process exits
     * while the sampler restarts and a process that is no pod's (the kubelet answers nothing for it) runs on the GPU
     * from then on; the sampler restarts every 3 min 50 s (a service restarted, or `gpusched run`'s per-job sampler on
     * a node without a service). The pod stays the GPU's holder for the whole 28 minutes, charged GPU time for
     * another's work, instead of ending GONE within 5 minutes of its processes' last listing.
     */
    @Test
    void restartsDoNotKeepAGoneJobsUnconfirmedTrackBeyondTheBound() {
        owners.put(101, pod("ml", "train")); // 202 is no pod's: the kubelet answers nothing for it
        try (MigNode n = new MigNode()) {
            n.inventory.setProcessTraces(WHOLE, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(6); // T0 + 60 s: the pod's process is listed on GPU 1
            n.restart(); // the pod's process exits while the sampler restarts; another's starts
            n.inventory.setProcessTraces(WHOLE, Map.of(202, UsageTrace.of(STEP, 40)));
            for (int i = 0; i < 7; i++) {
                n.run(23); // 3 min 50 s: within the bound, off the checkpoints
                n.restart();
            }
            n.run(6); // to T0 + 28 min
        }
        List<Interval> track = intervals("pod:ml/train@");
        assertThat(track).as("the pod was recorded on GPU 1").isNotEmpty();
        Interval last = track.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("expected the pod's track to end (GONE) within " + BOUND_S + " s of the"
                        + " first sweep that found none of its processes on GPU 1 (T0 + 70 s), restarts or not; it"
                        + " never ended in 28 minutes: last interval " + track.get(track.size() - 1)));
        assertThat(last.to()).as("kept unconfirmed from T0 + 70 s for at most the bound (%d s), not for the bound"
                + " again at every restart", BOUND_S).isBeforeOrEqualTo(T0.plusSeconds(70 + BOUND_S));
    }

    /**
     * Review61's restart case (a restart does not start the 5-minute bound of a GPU that cannot be listed over), with
     * the restart in the checkpoint interval in which the GPU stopped listing: the stop writes the pod's record from
     * the last checkpoint, which holds the sweeps that still listed it, so the record "measured" the GPU and the
     * restarted sampler carries the track for 5 minutes more from the restart. With {@code gpu.accounting.checkpoint:
     * 5m} (1 s to 1 h allowed) the pod holds a GPU that listed nothing for 9 min 30 s, nearly twice the bound; with
     * any checkpoint the bound is exceeded by the time from the GPU's last listing to the restart (up to one
     * checkpoint interval, and up to another 5 minutes).
     */
    @Test
    void aRestartInTheCheckpointIntervalTheGpuStoppedListingInDoesNotStartTheBoundOver() {
        owners.put(101, pod("ml", "train"));
        try (MigNode n = new MigNode(Duration.ofMinutes(5))) {
            n.inventory.setProcessTraces(WHOLE, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep();
            n.run(31); // T0 + 310 s: listed (a checkpoint at T0 + 300 s)
            n.inventory.setProcessTraces(WHOLE, Map.of()); // GPU 1 answers no per-process figures from now on
            n.run(27); // to T0 + 580 s: unlisted since T0 + 320 s, within the bound
            n.restart();
            n.run(62); // to T0 + 1200 s
        }
        List<Interval> track = intervals("pod:ml/train@");
        assertThat(trackIds("pod:ml/train@")).hasSize(1);
        Interval last = track.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("expected the pod's track to end (GONE) once its GPU had not listed for 5"
                        + " minutes, restart or not; it never ended: " + track));
        assertThat(last.to()).as("kept from its GPU's first unlisted sweep (T0 + 320 s) for at most the bound (%d s),"
                + " not for the bound again from the restart (T0 + 580 s)", BOUND_S)
                .isBeforeOrEqualTo(T0.plusSeconds(320 + BOUND_S));
    }

    /**
     * The same kubelet outage under a running sampler. Review61's fix keeps a track whose GPU lists processes no source
     * answers for (a kubelet not up: "not nobody's", ExternalHolders.unconfirmed) only for a track a restarted
     * sampler resumed; a sampler that keeps running drops the pod at the first sweep that asks again once the source
     * answers nothing (PodResourcesAttribution: "the last list is used for a minute, then nothing"), though the pod's
     * process is listed on its GPU throughout ("a pod or job holds a GPU from the first sweep one of its processes is
     * listed on it to the first sweep none is"). A kubelet restart longer than the source's minute (node upgrades)
     * thus ends every pod of the node GONE and starts a second track for each, and {@code gpusched report ml/train}
     * refuses each as a pod seen in several tracks; the same outage across a sampler restart keeps one track.
     */
    @Test
    void aKubeletOutageUnderARunningSamplerDoesNotSplitAPodThatNeverLeft() {
        owners.put(101, pod("ml", "train"));
        try (MigNode n = new MigNode()) {
            n.inventory.setProcessTraces(WHOLE, Map.of(101, UsageTrace.of(STEP, 60))); // runs throughout
            n.sweep();
            n.run(9); // T0 + 90 s
            kubeletUp[0] = false; // the kubelet restarting, the source's minute of its last list spent: no answer
            n.run(6); // to T0 + 150 s
            kubeletUp[0] = true;
            n.run(9); // to T0 + 240 s
        }
        assertThat(intervals("pod:ml/train@")).as("the pod was recorded on GPU 1").isNotEmpty();
        assertThat(trackIds("pod:ml/train@")).as("one track for a pod whose process was listed on GPU 1 throughout,"
                + " while the kubelet did not answer for 60 s (as across a sampler restart: review61)").hasSize(1);
        assertThat(AllocationUsage.allocationsOfJob(AccountingStore.at(dir), "ml/train", 10))
                .as("`gpusched report ml/train` must find one track, not refuse a pod seen in several").hasSize(1);
    }
}
