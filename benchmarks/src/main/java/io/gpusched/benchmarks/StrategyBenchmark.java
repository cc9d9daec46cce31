package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
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
 * allocate + release of a 2-GPU request on an empty node, per strategy, including the exhaustive partition search
 * (go-gpuallocator's method) as the baseline; that one is skipped on the 64-partition pool, where it cannot finish.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class StrategyBenchmark {

    @Param({"dgx1-v100", "dgx-h100", "pcie-4xa10", "dgx1-x2", "parts-64"})
    public String node;

    @Param({"packing", "spreading", "topology", "thermal", "exhaustive"})
    public String strategy;

    private GpuInventory inventory;
    private GpuScheduler scheduler;
    private GpuRequest request;
    private boolean skip;

    @Setup(Level.Trial)
    public void setUp() {
        inventory = Nodes.named(node);
        skip = strategy.equals("exhaustive") && node.equals("parts-64");
        AllocationStrategy s = switch (strategy) {
            case "exhaustive" -> new ExhaustivePartitionStrategy();
            case "thermal" -> AllocationStrategies.thermalAware(AllocationStrategies.topologyAware(),
                    Duration.ofDays(365));
            default -> AllocationStrategies.byName(strategy);
        };
        scheduler = GpuScheduler.builder().inventory(inventory).strategy(s).auditLogging(false)
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
        if (skip) {
            return false;
        }
        Allocation a = scheduler.allocate(request);
        return scheduler.release(a.id());
    }
}
