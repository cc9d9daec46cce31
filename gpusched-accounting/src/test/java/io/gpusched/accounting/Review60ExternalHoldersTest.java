package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuProcessUsage;
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
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 60: pods and Slurm jobs metered as holders of the GPUs no allocation holds (ExternalHolders), after
 * review59's fixes (bd0bf6eb), against the scripted node of ExternalHoldersTest with process lists shaped as the real
 * backends answer them.
 */
class Review60ExternalHoldersTest {
    private static final Instant T0 = AccountingNode.T0;
    private static final Duration STEP = Duration.ofSeconds(10);

    /**
     * What NvmlInventory.processUsage answers for a healthy, non-MIG GPU on a driver whose NVML has no
     * nvmlDeviceGetComputeRunningProcesses_v3 (R470 and older; NvmlSession.runningProcesses answers
     * ERROR_FUNCTION_NOT_FOUND without calling): NvmlProcessUsage.assemble/combine take the processes from
     * nvmlDeviceGetProcessUtilization's samples alone (memory not reported per process) and say memory is not measured,
     * naming the missing call. The same shape comes from a running-process call answering NOT_SUPPORTED or
     * NO_PERMISSION (NvmlSession returns those codes as a list, not as a fault).
     */
    static final String NO_V3 = "this driver's NVML has no nvmlDeviceGetComputeRunningProcesses_v3";

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

    private static UsageReport.Row row(UsageReport r, String key) {
        return r.rows().stream().filter(x -> x.key().equals(key)).findFirst().orElseThrow(() -> new AssertionError(
                "expected a row " + key + " in " + r.rows().stream().map(UsageReport.Row::key).toList()));
    }

    private static List<Interval> intervals(Path state, String prefix) {
        List<Interval> out = new ArrayList<>();
        AccountingStore store = AccountingStore.at(state);
        for (var d : store.days()) {
            store.readDay(d, r -> {
                if (r instanceof Interval iv && iv.allocationId().startsWith(prefix)) {
                    out.add(iv);
                }
            }, new ArrayList<>());
        }
        return out;
    }

    /** The node's inventory with GPU 0's per-process answer replaced. */
    private static GpuInventory withProcessUsage(AccountingNode n,
            Function<GpuDevice, Optional<ProcessUsageSample>> gpu0) {
        return new GpuInventory() {
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
                return device.index() == 0 ? gpu0.apply(device) : n.inventory.processUsage(device);
            }

            @Override
            public void close() {
            }
        };
    }

    /**
     * docs/ACCOUNTING.md, "Pods and Slurm jobs in the store": "A pod or job holds a GPU from the first sweep one of its
     * processes is listed on it to the first sweep none is: its GPU-seconds are the time it had a process on the GPU".
     * On a GPU whose NVML has no nvmlDeviceGetComputeRunningProcesses_v3 (or answers it NOT_SUPPORTED/NO_PERMISSION),
     * every sample carries "memory not measured", so once the pod's process has gone, every later sweep's empty list
     * reads as "could not be listed" (ExternalHolders.unlisted, review59's fix) and keeps the pod: a healthy GPU with
     * no process on it holds the departed pod for ever, charged GPU-hours (and a track that never ends) until another
     * pod's process happens to show up there.
     */
    @Test
    void aPodThatLeftAGpuWhoseDriverListsProcessesBySamplesIsNotHeldForEver(@TempDir Path other) {
        owners.put(101, pod("ml", "train"));
        boolean[] running = {true};
        try (AccountingNode n = new AccountingNode(dir, settings(), source.orElse(ProcessAttribution.none()))) {
            GpuInventory r470 = withProcessUsage(n, d -> Optional.of(new ProcessUsageSample(n.clock.instant(),
                    running[0] ? List.of(new GpuProcessUsage(101, OptionalDouble.of(40), Optional.empty()))
                            : List.of(), // no sample since the last read: no process on the GPU
                    Optional.empty(), Optional.of(NO_V3))));
            AccountingSampler s = AccountingSampler.open(AccountingStore.at(other), settings(), r470,
                    source.orElse(ProcessAttribution.none()), new HostIdleEffects(n.scheduler), n.clock).orElseThrow();
            try {
                s.sweep(r470.sample(), List.of()); // T0: the pod's process is listed
                for (int i = 0; i < 5; i++) { // to T0 + 50 s
                    n.clock.advance(STEP);
                    s.sweep(r470.sample(), List.of());
                }
                running[0] = false; // the training process exits; from T0 + 60 s no process is on GPU 0
                for (int i = 0; i < 54; i++) { // to T0 + 600 s
                    n.clock.advance(STEP);
                    s.sweep(r470.sample(), List.of());
                }
            } finally {
                s.close();
            }
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(other), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        long held = row(byPod, "ml/train").figures().heldMillis();
        assertThat(held).as("the pod had a process on GPU 0 from T0 to T0 + 50 s (first sweep listing none: T0 + 60"
                + " s): it held GPU 0 for 60 s, not until the sampler stopped (T0 + 590 s) while its GPU sat empty")
                .isLessThanOrEqualTo(
                        60_000);
        assertThat(intervals(other, "pod:ml/train@").stream().filter(iv -> iv.end().isPresent()).toList())
                .as("the pod's track ends (GONE) once sweeps list GPU 0 with no process of it").isNotEmpty();
    }

    /**
     * docs/ACCOUNTING.md, "Whom a process works for" / "Pods and Slurm jobs in the store": a pod's process is the pod's
     * by the kubelet's PodResources list, which PodResourcesAttribution reads every 10 s and answers from whatever the
     * process is (it names the pod the GPU is assigned to; nothing while the kubelet has not answered for 60 s, or
     * while two pods time-slice the GPU). ExternalHolders remembers each pid's answer, the empty one too, and checks it
     * again only against the process's incarnation (AllocationAttribution.host() reads its start time, so on a host the
     * chain always has one): a pod's process first listed while the kubelet did not answer (a kubelet restart, or
     * gpusched restarted before the kubelet is up) stays "nobody's" for as long as it runs, though the kubelet has
     * named its pod for every sweep since. The pod is never charged.
     */
    @Test
    void aPodsProcessFirstSeenWhileTheKubeletWasDownIsChargedOnceTheKubeletAnswers() {
        boolean[] kubeletUp = {false};
        ProcessAttribution podResources = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                // as PodResourcesAttribution: the pod the kubelet assigned the GPU to, whatever the pid
                return kubeletUp[0] && device.index() == 0 ? Optional.of(pod("ml", "train")) : Optional.empty();
            }

            @Override
            public OptionalLong incarnation(int pid) {
                return OptionalLong.of(1_000_000L + pid); // the process's start time: it runs throughout
            }

            @Override
            public boolean namesOthers() {
                return true;
            }
        };
        try (AccountingNode n = new AccountingNode(dir, settings(), podResources)) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 60)));
            n.sweep(); // T0: the kubelet is restarting, its socket does not answer
            n.run(STEP, 1); // T0 + 10 s
            kubeletUp[0] = true; // from T0 + 20 s the kubelet lists ml/train on GPU 0
            n.run(STEP, 58); // to T0 + 590 s
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        assertThat(byPod.rows().stream().map(UsageReport.Row::key).toList())
                .as("the kubelet named ml/train as GPU 0's pod at every sweep from T0 + 20 s to T0 + 590 s, and its"
                        + " process ran at 60 % all along: the pod has a row")
                .contains("ml/train");
        assertThat(row(byPod, "ml/train").figures().heldMillis()).as("held from the first sweep the kubelet named"
                + " it (T0 + 20 s) to T0 + 590 s").isGreaterThanOrEqualTo(560_000);
    }

    /**
     * docs/ACCOUNTING.md: "The idle policy never judges them [pods and Slurm jobs]: gpusched did not grant these GPUs
     * and cannot release them", and "`status` and `/api/v1/usage/idle` list the allocations idle at their last
     * checkpoint and the policy's last step" (OpenAPI: "one entry per idle allocation", its field {@code allocation}).
     * IdleStatus.read, which /api/v1/usage/idle serves, takes every open track whose last checkpoint carries an idle
     * start, so a pod's track is listed as an idle allocation ({@code "allocation": "pod:ml/notebook@..."}), an id no
     * allocation API knows and no policy step will ever be taken on.
     */
    @Test
    void anIdlePodIsNotListedAmongTheIdleAllocations() {
        owners.put(201, pod("ml", "notebook"));
        Instant end;
        try (AccountingNode n = new AccountingNode(dir, settings(), source.orElse(ProcessAttribution.none()))) {
            n.inventory.setProcessTraces(0, Map.of(201, UsageTrace.of(STEP, 0))); // a kernel holding the GPU at 0 %
            n.sweep();
            n.run(STEP, 30); // T0 + 5 min: five checkpoints that each say idle
            end = n.clock.instant();
            assertThat(n.scheduler.allocations()).as("no allocation on the node").isEmpty();
            assertThat(IdleStatus.read(AccountingStore.at(dir), end).keySet())
                    .as("/api/v1/usage/idle lists idle allocations; the node has none (a pod is none, and the idle"
                            + " policy never judges it)")
                    .noneMatch(ExternalHolders::isExternal);
        }
    }

    /**
     * The same remembered answer, for a GPU handed from one pod to the next: PodResourcesAttribution reads the
     * kubelet's list at most every 10 s and names the pod that list assigns the GPU to, whatever the pid. A batch pod
     * that ends and the next pod the device plug-in gives the same GPU come within that time (the next pod's process
     * is on the GPU while the list read last still names the old pod); ExternalHolders asks about the new pid once,
     * keeps the answer (the old pod) while the process lives and never asks again, though every list read after names
     * the new pod. The old pod's track goes on with the new pod's work; the new pod is never charged.
     */
    @Test
    void aGpuHandedToTheNextPodChargesTheNextPodOnceTheKubeletListsIt() {
        UsageOwner[] assigned = {pod("batch", "job-a")};
        ProcessAttribution podResources = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                // as PodResourcesAttribution: the pod its latest list assigns the GPU to, whatever the pid
                return device.index() == 0 ? Optional.ofNullable(assigned[0]) : Optional.empty();
            }

            @Override
            public OptionalLong incarnation(int pid) {
                return OptionalLong.of(1_000_000L + pid); // each process's own start time
            }

            @Override
            public boolean namesOthers() {
                return true;
            }
        };
        try (AccountingNode n = new AccountingNode(dir, settings(), podResources)) {
            n.inventory.setProcessTraces(0, Map.of(101, UsageTrace.of(STEP, 70))); // job-a's process
            n.sweep();
            n.run(STEP, 12); // T0 + 120 s
            // job-a ends; job-b gets GPU 0 and its process (pid 201) is on it before the next list is read
            n.inventory.setProcessTraces(0, Map.of(201, UsageTrace.of(STEP, 90)));
            n.run(STEP, 1); // T0 + 130 s: the list read last (before job-b was admitted) still names job-a
            assigned[0] = pod("batch", "job-b"); // the next read, and every one after, names job-b
            n.run(STEP, 29); // to T0 + 420 s
        }
        UsageReport byPod = UsageReport.of(AccountingStore.at(dir), T0.minusSeconds(3600), T0.plusSeconds(3600),
                UsageReport.GroupBy.POD);
        assertThat(row(byPod, "batch/job-a").figures().heldMillis()).as("job-a's process ran from T0 to T0 + 120 s:"
                + " it is not charged job-b's 290 s after the kubelet named job-b").isLessThanOrEqualTo(130_000);
        assertThat(byPod.rows().stream().map(UsageReport.Row::key).toList()).as("job-b ran on GPU 0 from T0 + 130 s"
                + " to T0 + 420 s and the kubelet named it from T0 + 140 s: it has a row").contains("batch/job-b");
    }
}
