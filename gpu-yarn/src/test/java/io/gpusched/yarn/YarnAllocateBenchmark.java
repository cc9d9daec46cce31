package io.gpusched.yarn;

import io.gpusched.core.LedgerStatistics;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DevicePluginScheduler;
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
 * Time per {@code allocateDevices} of gpusched's YARN plugin and of Hadoop's {@code NvidiaGPUPluginForRuntimeV2} on
 * the same DGX-1 and the same corpus as {@link YarnComparison} (each invocation serves the next case, cycling), in
 * one run:
 * <ul>
 * <li>{@code hadoop}: Hadoop's {@code allocateDevices} (a placement decision from its cost table; it keeps nothing);
 * <li>{@code gpusched-decide}: gpusched's placement decision alone on the same inputs (device lookup, health, the
 * placement cache), what Hadoop's plugin does;
 * <li>{@code gpusched}: gpusched's whole {@code allocateDevices}: the decision plus the node ledger (the finished
 * containers' records released and the new one recorded in one forced append).
 * </ul>
 * Each call gets a {@code CONTAINER_ID} in its launch environment, as the NodeManager gives. Both plugins are warmed
 * first (Hadoop's builds its cost table on its first call). Logging is set to WARN so that the plugins' per-call
 * INFO lines do not count. The trial's end prints the node ledger's forces per call. Run:
 * <pre>
 * java -cp test-classes:classes:deps org.openjdk.jmh.Main YarnAllocateBenchmark
 * </pre>
 * {@link YarnAllocatePhases} splits the whole call into its phases.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 5, time = 1)
@Measurement(iterations = 10, time = 1)
@Fork(value = 3, jvmArgsAppend = {"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Xmx1g"})
public class YarnAllocateBenchmark {

    /** What is measured (see the class comment). */
    @Param({"hadoop", "gpusched-decide", "gpusched"})
    public String plugin;

    private DevicePluginScheduler scheduler;
    private GpuschedDevicePlugin ours;
    private Set<Device>[] offers;
    private int[] counts;
    private Map<String, String>[] envs;
    private boolean decideOnly;
    private int next;
    private long calls;
    private LedgerStatistics before;

    /** Builds both plugins and the corpus as the chosen plugin's devices. */
    @Setup
    @SuppressWarnings("unchecked")
    public void setup() throws Exception {
        YarnComparison c = new YarnComparison();
        boolean hadoop = plugin.equals("hadoop");
        Map<Integer, Device> devices = hadoop ? c.hadoopDevices : c.gpuschedDevices;
        scheduler = hadoop ? c.hadoop : c.gpusched;
        ours = c.gpusched;
        decideOnly = plugin.equals("gpusched-decide");
        offers = new Set[c.corpus.size()];
        counts = new int[c.corpus.size()];
        envs = new Map[c.corpus.size()];
        for (int i = 0; i < offers.length; i++) {
            offers[i] = YarnComparison.offer(devices, c.corpus.get(i).offerMask());
            counts[i] = c.corpus.get(i).count();
            envs[i] = Map.of("CONTAINER_ID", "container_1700000000000_0001_01_" + (100_000 + i));
        }
        for (int i = 0; i < offers.length; i++) {
            scheduler.allocateDevices(offers[i], counts[i], envs[i]);
        }
        before = ours.node().ledger.scheduler().ledgerStatistics().orElseThrow();
    }

    /** @return one allocation (or decision) for the next case of the corpus */
    @Benchmark
    public Set<Device> allocateDevices() {
        int i = next;
        next = i + 1 == offers.length ? 0 : i + 1;
        calls++;
        return decideOnly ? ours.decideOnly(offers[i], counts[i])
                : scheduler.allocateDevices(offers[i], counts[i], envs[i]);
    }

    /** Prints the node ledger's forces per measured call (warm-up included). */
    @TearDown(Level.Trial)
    public void forces() {
        LedgerStatistics after = ours.node().ledger.scheduler().ledgerStatistics().orElseThrow();
        long forces = after.forces() - before.forces();
        System.out.printf("%n[%s] %d calls, %d node-ledger forces (%.3f per call), %d records%n", plugin, calls,
                forces, calls == 0 ? 0.0 : (double) forces / calls, after.records() - before.records());
    }
}
