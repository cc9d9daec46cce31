package io.gpusched.yarn;

import io.gpusched.core.GpuInventories;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.Device;
import org.apache.hadoop.yarn.server.nodemanager.api.deviceplugin.DevicePluginScheduler;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.resourceplugin.com.nvidia.NvidiaGPUPluginForRuntimeV2;

/**
 * gpusched's YARN plugin side by side with Hadoop's {@link NvidiaGPUPluginForRuntimeV2} on a DGX-1 (8x V100, hybrid
 * cube-mesh): Hadoop's plugin is fed the {@code nvidia-smi topo -m} text of the node (it parses it into its cost
 * table); gpusched's reads the same node from its simulated {@code dgx1-v100} inventory (a test checks that the two
 * agree link by link). The corpus is exhaustive: every set of free GPUs of size 3 to 8 and every count from 2 to one
 * less than the free set (counts of 1 and "all free GPUs" have a single sensible answer and Hadoop short-cuts them).
 * Run {@code main} for the quality table.
 */
public final class YarnComparison {

    /** One occupancy state and request. */
    public record Case(int offerMask, int count) {
    }

    final TopoText topo = TopoText.dgx1();
    final NvidiaGPUPluginForRuntimeV2 hadoop;
    final GpuschedDevicePlugin gpusched;
    final Map<Integer, Device> hadoopDevices;
    final Map<Integer, Device> gpuschedDevices;
    final List<Case> corpus;

    /** Builds both plugins and the corpus. */
    public YarnComparison() throws Exception {
        hadoop = new NvidiaGPUPluginForRuntimeV2();
        hadoop.setPathOfGpuBinary("/usr/bin/nvidia-smi");
        hadoop.setShellExecutor(hadoop.new NvidiaCommandExecutor() {
            @Override
            public String getDeviceInfo() {
                return "0, 00000000:06:00.0\n1, 00000000:07:00.0\n2, 00000000:0A:00.0\n3, 00000000:0B:00.0\n"
                        + "4, 00000000:85:00.0\n5, 00000000:86:00.0\n6, 00000000:89:00.0\n7, 00000000:8A:00.0\n";
            }

            @Override
            public String getMajorMinorInfo(String devName) {
                return "c3:" + Integer.toHexString(Integer.parseInt(devName.substring("nvidia".length())));
            }

            @Override
            public String getTopologyInfo() {
                return topo.text;
            }

            @Override
            public void searchBinary() {
            }
        });
        hadoopDevices = hadoop.getDevices().stream().collect(Collectors.toMap(Device::getMinorNumber, d -> d));
        Configuration conf = new Configuration(false);
        conf.set(GpuschedDevicePlugin.KEY_STATE_DIR, tempLedger());
        conf.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
        gpusched = new GpuschedDevicePlugin(GpuInventories.simulated("dgx1-v100"), conf);
        gpuschedDevices = gpusched.getDevices().stream().collect(Collectors.toMap(Device::getMinorNumber, d -> d));
        List<Case> c = new ArrayList<>();
        for (int mask = 0; mask < 256; mask++) {
            int free = Integer.bitCount(mask);
            for (int k = 2; k < free; k++) {
                c.add(new Case(mask, k));
            }
        }
        corpus = List.copyOf(c);
    }

    /** @return the offer of a case as one plugin's devices */
    static Set<Device> offer(Map<Integer, Device> devices, int mask) {
        Set<Device> out = new TreeSet<>();
        for (int i = 0; i < 8; i++) {
            if ((mask >> i & 1) == 1) {
                out.add(devices.get(i));
            }
        }
        return out;
    }

    /** @return the GPU indices (minor numbers) one scheduler chooses for a case */
    static Set<Integer> choose(DevicePluginScheduler s, Map<Integer, Device> devices, Case c) {
        return s.allocateDevices(offer(devices, c.offerMask()), c.count(), Map.of()).stream()
                .map(Device::getMinorNumber).collect(Collectors.toCollection(TreeSet::new));
    }

    /** Quality of one plugin over the corpus, per count. */
    record Row(int count, int cases, double meanLinks, double meanBest, int optimal, int worstGap, int invalid) {
    }

    List<Row> quality(DevicePluginScheduler s, Map<Integer, Device> devices) {
        List<Row> rows = new ArrayList<>();
        for (int k = 2; k <= 7; k++) {
            int cases = 0;
            int optimal = 0;
            int worst = 0;
            int invalid = 0;
            long links = 0;
            long best = 0;
            for (Case c : corpus) {
                if (c.count() != k) {
                    continue;
                }
                cases++;
                Set<Integer> got = choose(s, devices, c);
                int b = topo.bestLinks(c.offerMask(), k);
                best += b;
                boolean inOffer = got.stream().allMatch(i -> (c.offerMask() >> i & 1) == 1);
                if (got.size() != k || !inOffer) {
                    invalid++;
                    continue;
                }
                int l = topo.linksOf(got);
                links += l;
                if (l == b) {
                    optimal++;
                }
                worst = Math.max(worst, b - l);
            }
            rows.add(new Row(k, cases, (double) links / cases, (double) best / cases, optimal, worst, invalid));
        }
        return rows;
    }

    /** @return the quality table as Markdown */
    String table() {
        List<Row> g = quality(gpusched, gpuschedDevices);
        List<Row> h = quality(hadoop, hadoopDevices);
        StringBuilder sb = new StringBuilder();
        sb.append("| GPUs asked | cases | best possible (mean NVLinks) | gpusched mean | gpusched optimal |"
                + " gpusched worst gap | Hadoop mean | Hadoop optimal | Hadoop worst gap |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|\n");
        int tc = 0;
        int go = 0;
        int ho = 0;
        for (int i = 0; i < g.size(); i++) {
            Row a = g.get(i);
            Row b = h.get(i);
            tc += a.cases();
            go += a.optimal();
            ho += b.optimal();
            sb.append(String.format(Locale.ROOT,
                    "| %d | %d | %.2f | %.2f | %d (%.1f%%) | %d | %.2f | %d (%.1f%%) | %d |%n",
                    a.count(), a.cases(), a.meanBest(), a.meanLinks(), a.optimal(), 100.0 * a.optimal() / a.cases(),
                    a.worstGap(), b.meanLinks(), b.optimal(), 100.0 * b.optimal() / b.cases(), b.worstGap()));
        }
        sb.append(String.format(Locale.ROOT, "| all | %d | | | %d (%.1f%%) | | | %d (%.1f%%) | |%n", tc, go,
                100.0 * go / tc, ho, 100.0 * ho / tc));
        return sb.toString();
    }

    /**
     * Prints the quality table.
     *
     * @param args none
     */
    public static void main(String[] args) throws Exception {
        System.out.print(new YarnComparison().table());
    }

    /** @return a new state directory, removed with what it holds when the JVM exits (a test, a benchmark fork) */
    private static String tempLedger() {
        try {
            Path dir = Files.createTempDirectory("gpusched-yarn");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try (Stream<Path> all = Files.walk(dir)) {
                    all.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
                } catch (IOException | UncheckedIOException e) {
                    System.err.println("could not remove " + dir + ": " + e);
                }
            }, "remove " + dir));
            return dir.toString();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
