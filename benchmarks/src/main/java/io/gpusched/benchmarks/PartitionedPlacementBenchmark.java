package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * allocate + release on fragmented partitioned pools (issue 13's 64-partition target): a fixed randomized corpus of
 * {@value #CASES} cases per node (20 to 80 % of the partitions held, at least 17 left, 2 to 8 GPUs asked, a third with
 * 1 to 3 required devices), one scheduler per case, cycled through. Sample mode: JMH reports the median (p0.50) of
 * single allocate+release times. Before measuring, setup checks every case: {@code topology} and
 * {@code topology-remaining} must give a set with exactly the key of the exact per-parent baseline of the same
 * objective ({@link ExactBaselines#perParent}), or setup fails and nothing is printed. Baselines in the same run:
 * {@code first-fit} (the required devices plus the first candidates: the scheduler's own cost) and the exact ones.
 * {@code select} times the strategy alone on the same cases.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 8, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(3)
public class PartitionedPlacementBenchmark {

    /** Cases per node. */
    public static final int CASES = 64;

    @Param({"mi300x-cpx-64", "h100-mig-56"})
    public String node;

    @Param({"first-fit", "topology", "topology-remaining", "exact-set", "exact-remaining"})
    public String strategy;

    private GpuScheduler[] schedulers;
    private GpuRequest[] requests;
    private SchedulingView[] views;
    private AllocationStrategy chosen;
    private int next;

    /** Required devices, then the first candidates. */
    static final AllocationStrategy FIRST_FIT = new AllocationStrategy() {
        @Override
        public String name() {
            return "first-fit";
        }

        @Override
        public List<Integer> select(GpuRequest r, SchedulingView view) {
            List<Integer> out = new ArrayList<>(r.requiredDevices());
            for (DeviceState d : view.candidates()) {
                if (out.size() < r.count() && !out.contains(d.index())) {
                    out.add(d.index());
                }
            }
            return out;
        }
    };

    static AllocationStrategy strategy(String name) {
        return switch (name) {
            case "first-fit" -> FIRST_FIT;
            case "exact-set" -> ExactBaselines.perParent(Objective.SET);
            case "exact-remaining" -> ExactBaselines.perParent(Objective.REMAINING);
            default -> AllocationStrategies.byName(name);
        };
    }

    /** One case: what is held, and the request. */
    record Case(List<Integer> busy, GpuRequest request) {
    }

    /** @return the corpus for a node, fixed by its seed */
    static List<Case> corpus(GpuInventory inv, long seed) {
        Random rnd = new Random(seed);
        int n = inv.devices().size();
        List<Case> out = new ArrayList<>();
        while (out.size() < CASES) {
            double p = 0.2 + 0.6 * rnd.nextDouble();
            List<Integer> busy = new ArrayList<>();
            List<Integer> free = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                (rnd.nextDouble() < p ? busy : free).add(i);
            }
            if (free.size() <= 16) {
                continue;
            }
            int k = 2 + rnd.nextInt(7);
            GpuRequest.Builder b = GpuRequest.builder().count(k);
            if (rnd.nextInt(3) == 0) {
                List<Integer> req = new ArrayList<>();
                int r = 1 + rnd.nextInt(Math.min(3, k - 1));
                while (req.size() < r) {
                    int d = free.get(rnd.nextInt(free.size()));
                    if (!req.contains(d)) {
                        req.add(d);
                    }
                }
                b.requiredDevices(req);
            }
            out.add(new Case(busy, b.build()));
        }
        return out;
    }

    static GpuScheduler scheduler(GpuInventory inv, AllocationStrategy s, Case c) {
        GpuScheduler sch = GpuScheduler.builder().inventory(inv).strategy(s).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        if (!c.busy().isEmpty()) {
            sch.allocate(GpuRequest.builder().deviceIndices(c.busy()).build());
        }
        return sch;
    }

    @Setup(Level.Trial)
    public void setUp() {
        GpuInventory inv = Nodes.named(node);
        List<Case> cases = corpus(inv, node.hashCode());
        AllocationStrategy s = strategy(strategy);
        chosen = s;
        schedulers = new GpuScheduler[cases.size()];
        requests = new GpuRequest[cases.size()];
        views = new SchedulingView[cases.size()];
        for (int i = 0; i < cases.size(); i++) {
            schedulers[i] = scheduler(inv, s, cases.get(i));
            requests[i] = cases.get(i).request();
            views[i] = PlacementQuality.view(schedulers[i], inv);
        }
        if (strategy.startsWith("topology")) {
            PlacementQuality.Report r = PlacementQuality.judge(inv, cases, strategy);
            if (r.notOptimal() > 0) {
                throw new IllegalStateException(strategy + " missed the exact optimum on " + r.notOptimal() + " of "
                        + r.cases() + " cases of " + node + "; no score");
            }
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        for (GpuScheduler s : schedulers) {
            s.close();
        }
    }

    /** The strategy alone on the same cases (views of the same states): its share of allocateRelease. */
    @Benchmark
    public List<Integer> select() {
        int i = next;
        next = i + 1 == views.length ? 0 : i + 1;
        return chosen.select(requests[i], views[i]);
    }

    @Benchmark
    public boolean allocateRelease() {
        int i = next;
        next = i + 1 == schedulers.length ? 0 : i + 1;
        Allocation a = schedulers[i].allocate(requests[i]);
        return schedulers[i].release(a.id());
    }
}
