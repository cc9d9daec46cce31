package io.gpusched.yarn;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DevicePluginScheduler;
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
import org.openjdk.jmh.annotations.Warmup;

/**
 * Time per {@code allocateDevices} of gpusched's YARN plugin and of Hadoop's {@code NvidiaGPUPluginForRuntimeV2} on
 * the same DGX-1 and the same corpus as {@link YarnComparison} (each invocation serves the next case, cycling). Both
 * plugins are warmed first (Hadoop's builds its cost table on its first call). Logging is set to WARN so that Hadoop's
 * per-call INFO line does not count. Run:
 * <pre>
 * java -cp test-classes:classes:deps org.openjdk.jmh.Main YarnAllocateBenchmark
 * </pre>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 5, time = 1)
@Measurement(iterations = 10, time = 1)
@Fork(value = 3, jvmArgsAppend = {"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Xmx1g"})
public class YarnAllocateBenchmark {

    /** Which plugin. */
    @Param({"gpusched", "hadoop"})
    public String plugin;

    private DevicePluginScheduler scheduler;
    private Set<Device>[] offers;
    private int[] counts;
    private int next;

    /** Builds both plugins and the corpus as the chosen plugin's devices. */
    @Setup
    @SuppressWarnings("unchecked")
    public void setup() throws Exception {
        YarnComparison c = new YarnComparison();
        Map<Integer, Device> devices = plugin.equals("hadoop") ? c.hadoopDevices : c.gpuschedDevices;
        scheduler = plugin.equals("hadoop") ? c.hadoop : c.gpusched;
        offers = new Set[c.corpus.size()];
        counts = new int[c.corpus.size()];
        for (int i = 0; i < offers.length; i++) {
            offers[i] = YarnComparison.offer(devices, c.corpus.get(i).offerMask());
            counts[i] = c.corpus.get(i).count();
        }
        for (int i = 0; i < offers.length; i++) {
            scheduler.allocateDevices(offers[i], counts[i], Map.of());
        }
    }

    /** @return one allocation for the next case of the corpus */
    @Benchmark
    public Set<Device> allocateDevices() {
        int i = next;
        next = i + 1 == offers.length ? 0 : i + 1;
        return scheduler.allocateDevices(offers[i], counts[i], Map.of());
    }
}
