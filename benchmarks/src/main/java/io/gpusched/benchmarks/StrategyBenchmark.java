package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Duration;
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
 * allocate + release of a 2-GPU request on an empty node, per strategy. Like-for-like baselines in the same run:
 * {@code exact-set} and {@code exact-remaining} enumerate every 2-subset and keep the best by the same objective as
 * {@code topology} and {@code topology-remaining} ({@link ExactBaselines#subsets}); {@code first-fit} takes the first
 * two candidates (the scheduler's own cost). {@code partition} is go-gpuallocator's search over every partition of the
 * free GPUs, which optimizes another objective (the best partition of all free GPUs into pairs); it runs only where
 * the free GPUs divide into pairs and number at most 16, and elsewhere its setup fails, so JMH prints no score for it.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 500, timeUnit = TimeUnit.MILLISECONDS)
@Measurement(iterations = 4, time = 500, timeUnit = TimeUnit.MILLISECONDS)
@Fork(3)
public class StrategyBenchmark {

    @Param({"dgx1-v100", "dgx-h100", "pcie-4xa10", "dgx1-x2", "parts-64", "mi300x-cpx-64", "h100-mig-56"})
    public String node;

    @Param({"first-fit", "packing", "spreading", "topology", "topology-remaining", "thermal", "exact-set",
        "exact-remaining", "partition"})
    public String strategy;

    private GpuInventory inventory;
    private GpuScheduler scheduler;
    private GpuRequest request;

    static AllocationStrategy strategy(String name) {
        return switch (name) {
            case "first-fit" -> AllocatorBenchmark.FIRST_FIT;
            case "partition" -> new ExhaustivePartitionStrategy();
            case "exact-set" -> ExactBaselines.subsets(Objective.SET);
            case "exact-remaining" -> ExactBaselines.subsets(Objective.REMAINING);
            case "thermal" -> AllocationStrategies.thermalAware(AllocationStrategies.topologyAware(),
                    Duration.ofDays(365));
            default -> AllocationStrategies.byName(name);
        };
    }

    @Setup(Level.Trial)
    public void setUp() {
        inventory = Nodes.named(node);
        int n = inventory.devices().size();
        if (strategy.equals("partition") && (n > 16 || n % 2 != 0)) {
            throw new IllegalStateException("the partition baseline cannot run on " + node + " (" + n
                    + " GPUs: it enumerates (n-1)!! partitions); no score");
        }
        scheduler = GpuScheduler.builder().inventory(inventory).strategy(strategy(strategy)).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        scheduler.updateMetrics(inventory.sample());
        request = GpuRequest.builder().count(2).build();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        scheduler.close();
    }

    @Benchmark
    public boolean allocateRelease() {
        Allocation a = scheduler.allocate(request);
        return scheduler.release(a.id());
    }
}
