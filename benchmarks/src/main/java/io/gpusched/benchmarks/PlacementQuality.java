package io.gpusched.benchmarks;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Instant;
import java.util.List;

/**
 * Judges the topology strategy against exact baselines on the fragmented corpora of
 * {@link PartitionedPlacementBenchmark}: for each case and objective, the key of the strategy's set against the key of
 * the exact per-parent search of the same objective. Prints one line per node and objective and exits 1 if any case
 * missed. {@code java -cp benchmarks/target/benchmarks.jar io.gpusched.benchmarks.PlacementQuality}
 */
public final class PlacementQuality {
    private PlacementQuality() {
    }

    /** Outcome on one corpus. */
    record Report(int cases, int notOptimal, int naiveNotOptimal) {
    }

    public static void main(String[] args) {
        int missed = 0;
        for (String node : new String[]{"mi300x-cpx-64", "h100-mig-56", "parts-64"}) {
            GpuInventory inv = Nodes.named(node);
            List<PartitionedPlacementBenchmark.Case> cases = PartitionedPlacementBenchmark.corpus(inv, node.hashCode());
            for (String s : new String[]{"topology", "topology-remaining"}) {
                Report r = judge(inv, cases, s);
                missed += r.notOptimal();
                System.out.printf("%s %s: %d cases, %d not at the exact optimum; first-fit not optimal in %d%n", node,
                        s, r.cases(), r.notOptimal(), r.naiveNotOptimal());
            }
        }
        System.exit(missed == 0 ? 0 : 1);
    }

    static Report judge(GpuInventory inv, List<PartitionedPlacementBenchmark.Case> cases, String strategy) {
        Objective o = strategy.equals("topology") ? Objective.SET : Objective.REMAINING;
        AllocationStrategy s = AllocationStrategies.byName(strategy);
        AllocationStrategy exact = ExactBaselines.perParent(o);
        int bad = 0;
        int naiveBad = 0;
        for (PartitionedPlacementBenchmark.Case c : cases) {
            GpuScheduler sch = PartitionedPlacementBenchmark.scheduler(inv, s, c);
            SchedulingView view = view(sch, inv);
            List<Integer> got = s.select(c.request(), view);
            long[] best = ExactBaselines.key(o, view, exact.select(c.request(), view));
            if (ExactBaselines.compare(ExactBaselines.key(o, view, got), best) != 0) {
                bad++;
            }
            List<Integer> naive = PartitionedPlacementBenchmark.FIRST_FIT.select(c.request(), view);
            if (ExactBaselines.compare(ExactBaselines.key(o, view, naive), best) != 0) {
                naiveBad++;
            }
            // and through the scheduler: the same set
            List<Integer> viaScheduler = sch.allocate(c.request()).deviceIndices();
            if (!viaScheduler.containsAll(got) || viaScheduler.size() != got.size()) {
                bad++;
            }
            sch.close();
        }
        return new Report(cases.size(), bad, naiveBad);
    }

    /** The scheduler's free devices as candidates, in index order. */
    static SchedulingView view(GpuScheduler sch, GpuInventory inv) {
        List<DeviceState> all = sch.devices();
        List<DeviceState> cands = all.stream().filter(d -> d.isIdle() && d.isAllocatable()).toList();
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return all;
            }

            @Override
            public List<DeviceState> candidates() {
                return cands;
            }

            @Override
            public DeviceState device(int index) {
                return all.stream().filter(d -> d.index() == index).findFirst().orElseThrow();
            }

            @Override
            public GpuTopology topology() {
                return inv.topology();
            }

            @Override
            public Instant now() {
                return Instant.now();
            }
        };
    }
}
