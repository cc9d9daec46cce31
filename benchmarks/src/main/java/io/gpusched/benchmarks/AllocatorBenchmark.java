package io.gpusched.benchmarks;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.SchedulingView;
import java.util.List;
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
 * allocate + release of one request on a simulated node, per built-in strategy. The {@code first-fit} strategy is
 * the baseline in the same run: it takes the first eligible devices, so its time is the scheduler's own cost
 * (validation, eligibility, commit, release) and the difference to it is what a strategy's choice costs.
 * A quarter of the node is held by an exclusive allocation throughout, so strategies see a partly used node.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class AllocatorBenchmark {

    @Param({"dgx1-v100", "dgx-h100", "pcie-4xa10", "mi210-8x"})
    public String profile;

    @Param({"first-fit", "packing", "spreading"})
    public String strategy;

    @Param({"1", "2"})
    public int count;

    private GpuInventory inventory;
    private GpuScheduler scheduler;
    private GpuRequest request;

    /** Baseline: the first {@code count} eligible devices, in index order. */
    static final AllocationStrategy FIRST_FIT = new AllocationStrategy() {
        @Override
        public String name() {
            return "first-fit";
        }

        @Override
        public List<Integer> select(GpuRequest r, SchedulingView view) {
            return view.candidates().stream().limit(r.count()).map(DeviceState::index).toList();
        }
    };

    @Setup(Level.Trial)
    public void setUp() {
        inventory = GpuInventories.simulated(profile);
        AllocationStrategy s = strategy.equals("first-fit") ? FIRST_FIT : AllocationStrategies.byName(strategy);
        scheduler = GpuScheduler.builder().inventory(inventory).strategy(s).auditLogging(false).build();
        int held = Math.max(1, inventory.devices().size() / 4);
        scheduler.allocate(GpuRequest.builder().count(held).build());
        request = GpuRequest.builder().count(count).build();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        scheduler.close();
        inventory.close();
    }

    @Benchmark
    public boolean allocateRelease() {
        Allocation a = scheduler.allocate(request);
        return scheduler.release(a.id());
    }
}
