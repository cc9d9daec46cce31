package io.gpusched.benchmarks;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/** Throughput of allocate + release of one GPU with 8 threads on one scheduler (dgx-h100, 8 GPUs). */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
@Threads(8)
public class ConcurrentAllocatorBenchmark {
    @Param({"packing", "topology"})
    public String strategy;

    private GpuScheduler scheduler;
    private final GpuRequest one = GpuRequest.builder().build();

    @Setup
    public void setUp() {
        scheduler = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .strategy(AllocationStrategies.byName(strategy)).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    @Benchmark
    public boolean allocateRelease() {
        return scheduler.release(scheduler.allocate(one).id());
    }
}
