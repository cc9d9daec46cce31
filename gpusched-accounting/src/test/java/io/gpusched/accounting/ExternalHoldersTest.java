package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pods and Slurm jobs that use GPUs without an allocation are metered by their processes and reported by pod and by
 * job (docs/ACCOUNTING.md, "Pods and Slurm jobs"), against a scripted node: every figure is what the script implies.
 */
class ExternalHoldersTest {
    private static final Instant T0 = AccountingNode.T0;
    private static final Duration STEP = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    /** pid to owner, as a chained source (the kubelet's, Slurm's) would name them */
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
        // a policy that would flag anything idle for 2 minutes: pods and jobs are never judged
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private AccountingNode node(Path state) {
        owners.put(101, pod("ml", "train"));
        owners.put(201, pod("ml", "notebook"));
        owners.put(102, pod("ml", "train"));
        owners.put(301, new UsageOwner(UsageOwner.Kind.SLURM_JOB, "4242", Map.of("uid", "54321", "cgroup", "v1")));
        AccountingNode n = new AccountingNode(state, settings(), source.orElse(ProcessAttribution.none()));
        // GPU 0: two pods share it, one at 60 %, one idle; GPU 1: a Slurm job at 80 %; GPU 2: alice's allocation,
        // at 30 %, with a process of the train pod on it too (10 %): not the pod's (the GPU is alice's)
        n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60), 201, UsageTrace.of(STEP, 0)));
        n.inventory.setProcessTraces(1, Map.of(301, UsageTrace.of(STEP, 80)));
        return n;
    }

    private static UsageReport.Row row(UsageReport r, String key) {
        return r.rows().stream().filter(x -> x.key().equals(key)).findFirst().orElseThrow(() -> new AssertionError(
                "no row " + key + " in " + r.rows().stream().map(UsageReport.Row::key).toList()));
    }

    @Test
    void podsAndSlurmJobsAreMeteredByTheirProcessesAndReportedByPodAndJob() {
        List<IdleAction> steps = new ArrayList<>();
        try (AccountingNode n = node(dir)) {
            Allocation alice = n.scheduler.allocate(GpuRequest.builder().requiredDevices(2).owner("alice").build());
            owners.put(401, UsageOwner.allocation(alice.id()));
            n.inventory.setProcessTraces(2, Map.of(401, UsageTrace.of(STEP, 30), 102, UsageTrace.of(STEP, 10)));
            steps.addAll(n.sweep()); // T0
            steps.addAll(n.run(STEP, 30)); // to T0 + 5 min
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60))); // the notebook's process ends
            steps.addAll(n.run(STEP, 6)); // to T0 + 6 min
            n.scheduler.release(alice.id());
        }
        assertThat(steps).as("the policy judges allocations only: the idle notebook is never flagged")
                .allSatisfy(a -> assertThat(a.allocationId()).doesNotStartWith("pod:"));
        AccountingStore store = AccountingStore.at(dir);
        Instant from = T0.minusSeconds(3600);
        Instant until = T0.plusSeconds(3600);

        UsageReport byPod = UsageReport.of(store, from, until, UsageReport.GroupBy.POD);
        UsageReport.Row train = row(byPod, "ml/train");
        assertThat(train.owner()).as("a pod's owner is its namespace").contains("ml");
        assertThat(train.devices()).as("its process on alice's GPU is not the pod's").containsExactly(0);
        assertThat(train.figures().heldMillis()).as("first sweep to last: 6 min").isEqualTo(360_000);
        assertThat(train.figures().meanUtilization().getAsDouble()).isEqualTo(60.0);
        assertThat(train.figures().idleMillis()).isZero();
        UsageReport.Row notebook = row(byPod, "ml/notebook");
        assertThat(notebook.figures().heldMillis()).as("from its first sweep to the first without its process: 5 min")
                .isEqualTo(300_000);
        assertThat(notebook.figures().idleFraction().getAsDouble()).isEqualTo(1.0);
        UsageReport.Row rest = row(byPod, UsageReport.NO_OWNER);
        assertThat(rest.figures().heldMillis()).as("alice's 6 min and the Slurm job's 6 min")
                .isEqualTo(720_000);
        assertThat(byPod.total().heldMillis()).isEqualTo(train.figures().heldMillis()
                + notebook.figures().heldMillis() + rest.figures().heldMillis());

        UsageReport byJob = UsageReport.of(store, from, until, UsageReport.GroupBy.SLURM_JOB);
        UsageReport.Row job = row(byJob, "4242");
        assertThat(job.figures().heldMillis()).isEqualTo(360_000);
        assertThat(job.figures().meanUtilization().getAsDouble()).isEqualTo(80.0);
        assertThat(job.owner()).as("pid 301's uid is not known here: the uid the cgroup path names")
                .isPresent();
        assertThat(job.devices()).containsExactly(1);

        UsageReport byAlloc = UsageReport.of(store, from, until, UsageReport.GroupBy.ALLOCATION);
        Map<String, UsageReport.Row> allocs = byAlloc.rows().stream().collect(Collectors.toMap(
                UsageReport.Row::key, x -> x));
        UsageReport.Row aliceRow = allocs.values().stream().filter(x -> x.owner().equals(Optional.of("alice")))
                .findFirst().orElseThrow();
        assertThat(aliceRow.figures().meanUtilization().getAsDouble()).as("an exclusive GPU's figures are its"
                + " holder's: the pod's process on it is not the pod's").isEqualTo(40.0);
        assertThat(allocs.keySet()).as("one track per pod and job, each id naming its kind").filteredOn(
                k -> k.startsWith("pod:") || k.startsWith("slurm-job:")).hasSize(3);

        // the text and JSON views name the rows by pod, with the rest apart
        String text = ReportViews.text(byPod);
        assertThat(text).contains("ml/train ml").contains("(no pod)").contains(", by pod");
        assertThat(ReportViews.report(byJob).get("by")).isEqualTo("slurm-job");
        // a pod is a job to `gpusched report ID`
        assertThat(AllocationUsage.allocationsOfJob(store, "ml/notebook", 10)).hasSize(1);
    }

    @Test
    void aRestartedSamplerContinuesAPodsTrack() {
        try (AccountingNode n = node(dir)) {
            n.sweep();
            n.run(STEP, 9); // T0 + 90 s: one checkpoint at 60 s
            n.restartSampler();
            n.run(STEP, 9); // T0 + 180 s
        }
        List<Interval> train = new ArrayList<>();
        AccountingStore store = AccountingStore.at(dir);
        store.readDay(LocalDate.of(2026, 3, 2), r -> {
            if (r instanceof Interval iv && iv.allocationId().startsWith("pod:ml/train@")) {
                train.add(iv);
            }
        }, new ArrayList<>());
        assertThat(train.stream().map(Interval::allocationId).distinct()).as("one track across the restart")
                .hasSize(1);
        UsageReport byPod = UsageReport.of(store, T0, T0.plusSeconds(3600), UsageReport.GroupBy.POD);
        UsageReport.Row r = row(byPod, "ml/train");
        assertThat(r.figures().heldMillis()).as("held from T0 to T0 + 180 s").isEqualTo(180_000);
        assertThat(r.figures().measuredMillis()).as("all but the restart's step").isEqualTo(170_000);
    }

    @Test
    void withoutASourceThatNamesOthersNothingButAllocationsIsMetered() {
        Map<Integer, UsageOwner> none = new HashMap<>();
        try (AccountingNode n = new AccountingNode(dir, settings(), (d, pid, hs) -> Optional.ofNullable(none.get(
                pid)))) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            none.put(101, pod("ml", "train")); // named, but the source does not say it names others
            n.sweep();
            n.run(STEP, 12);
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0, T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        assertThat(byPod.rows()).isEmpty();
    }

    /**
     * The per-process figures of a sweep are read once for the pass that finds the pods and the meter alike: a
     * backend's per-process utilization is a mean since its previous call (NVML's, the simulated node's), so a second
     * read within the sweep would see no time and give the instant's figure.
     */
    @Test
    void perProcessFiguresAreReadOncePerSweep() {
        try (AccountingNode n = node(dir)) {
            // 100 % for 5 s, 0 % for 5 s: every sweep (10 s apart) falls at the start of a busy step
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(Duration.ofSeconds(5), 100, 0)));
            n.inventory.setProcessTraces(1, Map.of());
            n.sweep();
            n.run(STEP, 12);
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0, T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        assertThat(row(byPod, "ml/train").figures().meanUtilization().getAsDouble()).as("the mean over each step, not"
                + " the sweep's instant").isEqualTo(50.0);
    }

    /**
     * A GPU whose processes cannot be listed keeps its holders (not measured), but not for ever: a job kept only by
     * GPUs that have not listed for {@link ExternalHolders#MAX_UNLISTED_MILLIS} ends (a GPU that fell off the bus).
     */
    @Test
    void aJobKeptOnlyByAGpuThatNeverListsAgainEnds() {
        try (AccountingNode n = node(dir)) {
            n.inventory.setProcessTraces(0, Map.of());
            n.sweep();
            n.run(STEP, 6); // T0 + 60 s: the job's process listed on GPU 1
            n.inventory.setProcessTraces(1, Map.of()); // from now on GPU 1 answers no per-process figures at all
            n.run(STEP, 60); // to T0 + 11 min
        }
        List<Interval> job = new ArrayList<>();
        AccountingStore.at(dir).readDay(LocalDate.of(2026, 3, 2), r -> {
            if (r instanceof Interval iv && iv.allocationId().startsWith("slurm-job:4242@")) {
                job.add(iv);
            }
        }, new ArrayList<>());
        assertThat(job.stream().map(Interval::allocationId).distinct()).hasSize(1);
        Interval last = job.stream().filter(iv -> iv.end().isPresent()).findFirst().orElseThrow(
                () -> new AssertionError("ended once unlisted for 5 minutes: " + job));
        assertThat(last.end()).contains("GONE");
        assertThat(last.to()).as("kept through 5 minutes of unlisted sweeps after its last listed one (T0 + 60 s)")
                .isEqualTo(T0.plusSeconds(60 + ExternalHolders.MAX_UNLISTED_MILLIS / 1000));
    }

    /**
     * The meter charges a pod's GPU by the answers the sampler's pass got at that sweep, not by an answer of its own it
     * keeps while the process's incarnation stands (a pod source answers from the kubelet's list, which changes under
     * a process: review60). Two real processes (this JVM and a child, so gpusched's own rule reads their incarnations)
     * on one GPU; the source swaps their pods after two minutes.
     */
    @Test
    void theMeterChargesByThisSweepsAnswersNotByOneItKept() throws Exception {
        Process child = new ProcessBuilder("sleep", "120").start();
        try {
            int self = (int) ProcessHandle.current().pid();
            int other = (int) child.pid();
            Map<Integer, UsageOwner> now = new ConcurrentHashMap<>(Map.of(self, pod("ml", "a"), other, pod("ml", "b")));
            ProcessAttribution swapping = new ProcessAttribution() {
                @Override
                public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                    return Optional.ofNullable(now.get(pid));
                }

                @Override
                public boolean namesOthers() {
                    return true;
                }
            };
            try (AccountingNode n = new AccountingNode(dir, settings(),
                    io.gpusched.core.host.AllocationAttribution.host().orElse(swapping))) {
                n.inventory.setProcessTraces(0, Map.of(self, UsageTrace.of(STEP, 80), other, UsageTrace.of(STEP, 20)));
                n.sweep();
                n.run(STEP, 12); // two minutes: a at 80 %, b at 20 %
                now.put(self, pod("ml", "b"));
                now.put(other, pod("ml", "a"));
                n.run(STEP, 12); // two minutes swapped
            }
        } finally {
            child.destroyForcibly();
            child.waitFor(30, java.util.concurrent.TimeUnit.SECONDS);
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0, T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        double a = row(byPod, "ml/a").figures().meanUtilization().getAsDouble();
        assertThat(a).as("80 %% for two minutes, 20 %% for two (an answer asked again within 10 s): about 50 %%, not"
                + " the first answer's 80 %% kept").isBetween(45.0, 55.0);
    }

    /**
     * A restarted sampler carries a pod's open track on a GPU whose processes no source answers for yet only within
     * the 5 minutes since its last record: after a longer downtime the pod is not known to be there (its process may
     * be another pod's by now), so the track ends GONE at its last record.
     */
    @Test
    void aLongDowntimeDoesNotCarryAPodsTrackWithoutAnAnswer() {
        try (AccountingNode n = node(dir)) {
            n.inventory.setProcessTraces(1, Map.of());
            n.sweep();
            n.run(STEP, 6); // T0 + 60 s: the train pod's process on GPU 0
            n.stopSampler();
            n.clock.advance(Duration.ofMinutes(10));
            owners.remove(101); // no source answers for its processes (a kubelet not up)
            owners.remove(201);
            n.startSampler();
            n.run(STEP, 3);
        }
        List<Interval> train = new ArrayList<>();
        AccountingStore.at(dir).readDay(LocalDate.of(2026, 3, 2), r -> {
            if (r instanceof Interval iv && iv.allocationId().startsWith("pod:ml/train@")) {
                train.add(iv);
            }
        }, new ArrayList<>());
        assertThat(train.stream().filter(iv -> iv.end().isPresent()).map(Interval::end).toList())
                .as("ended at its last record, not carried after 10 minutes down: %s", train).containsExactly(
                        Optional.of("GONE"));
    }
}
