package io.gpusched.benchmarks;

import io.gpusched.benchmarks.internal.Libc;
import io.gpusched.core.GpuSample;
import io.gpusched.nvml.FakeNvml;
import io.gpusched.nvml.NvmlInventory;
import io.gpusched.nvml.NvmlOptions;
import io.gpusched.nvml.internal.NvmlPoller;
import io.gpusched.nvml.internal.NvmlSession;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The polling path against the fake libnvidia-ml.so.1 (compiled here with gcc against the real nvml.h): one sweep of
 * an 8-GPU node is 32 NVML calls (utilization, memory v2, temperature, power per GPU). Baseline in the same run, in
 * every mode: {@code bareCall}, a direct-mapped JNA call into libc's {@code labs} (a real native call that does
 * nothing), so {@code sweep / bareCall} is the cost of a sweep in bare native calls. {@code sweepOneDevice} is one
 * GPU's 4 calls. Run with {@code -prof gc} for bytes per operation. {@code sweep} is the binding alone;
 * {@code sample} adds building the immutable GpuSample and the health bookkeeping. Set
 * {@code -Dgpusched.nvml.library=/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1} to poll a real driver instead.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class NvmlPollingBenchmark {
    /** NVML calls per device in one sweep. */
    public static final int CALLS_PER_DEVICE = 4;

    private NvmlInventory inventory;
    private NvmlSession session;
    private NvmlPoller poller;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        String real = System.getProperty("gpusched.nvml.library");
        Path lib;
        if (real != null) {
            lib = Path.of(real);
        } else {
            FakeNvml.unavailableReason().ifPresent(r -> {
                throw new IllegalStateException("cannot build the fake NVML: " + r);
            });
            lib = FakeNvml.build(Files.createTempDirectory("gpusched-bench-nvml"), false);
            FakeNvml.Control.bind(lib);
            FakeNvml.Control.fake_nvml_reset();
            FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.DGX1);
        }
        inventory = NvmlInventory.open(NvmlOptions.defaults().withLibrary(lib)
                .withHealthWatch(false, Duration.ofSeconds(1), Duration.ZERO));
        session = NvmlSession.open(Optional.of(lib));
        poller = new NvmlPoller(session, session.discover().gpuHandles());
        if (Libc.labs(-7) != 7) {
            throw new IllegalStateException("libc labs is not bound");
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        session.close();
        inventory.close();
    }

    /** One full sweep through the binding: 32 NVML calls on the 8-GPU fake, values into a reused long[]. */
    @Benchmark
    public long sweep() {
        poller.sweep();
        return poller.values()[1];
    }

    /** The public polling call: sweep plus the immutable GpuSample it returns. */
    @Benchmark
    public GpuSample sample() {
        return inventory.sample();
    }

    /** One GPU's 4 NVML calls. */
    @Benchmark
    public long sweepOneDevice() {
        poller.sweepOne(0);
        return poller.values()[1];
    }

    /** Baseline in every mode: a bare direct-mapped JNA call into libc ({@code labs}), one 64-bit argument. */
    @Benchmark
    public long bareCall() {
        return Libc.labs(-42L);
    }
}
