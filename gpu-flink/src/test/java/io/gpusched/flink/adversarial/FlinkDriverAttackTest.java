package io.gpusched.flink.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.flink.GpuschedDriverFactory;
import io.gpusched.flink.GpuschedGpuInfo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.flink.api.common.externalresource.ExternalResourceDriver;
import org.apache.flink.api.common.externalresource.ExternalResourceDriverFactory;
import org.apache.flink.api.common.externalresource.ExternalResourceInfo;
import org.apache.flink.configuration.Configuration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial checks of the Flink driver: silly amounts, the {@code index} property in the format Flink's own GPU
 * driver uses, two drivers in one JVM, the service file, bad parameters. The node ledger is inspected with an
 * independent scheduler on the same state directory.
 */
@Tag("adversarial")
class FlinkDriverAttackTest {

    @TempDir
    Path tmp;

    private Path state() throws Exception {
        Path s = tmp.resolve("state");
        Files.createDirectories(s);
        Files.setPosixFilePermissions(s, PosixFilePermissions.fromString("rwx------"));
        return s;
    }

    private static ExternalResourceDriver driver(Path state) throws Exception {
        Configuration p = new Configuration();
        p.setString("state-dir", state.toString());
        p.setString("inventory", "simulated:dgx1-v100");
        return new GpuschedDriverFactory().createExternalResourceDriver(p);
    }

    private static int held(Path state) {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).stateDir(state).build()) {
            s.refresh();
            return s.allocations().stream().mapToInt(a -> a.devices().size()).sum();
        }
    }

    @Test
    void serviceLoaderFindsTheFactory() {
        List<String> names = ServiceLoader.load(ExternalResourceDriverFactory.class).stream()
                .map(pr -> pr.type().getName()).collect(Collectors.toList());
        assertTrue(names.contains(GpuschedDriverFactory.class.getName()), names.toString());
    }

    @Test
    void indexPropertyIsThePlainIndexStringAndKeysAreConsistent() throws Exception {
        Path state = state();
        Set<? extends ExternalResourceInfo> infos = driver(state).retrieveResourceInfo(3);
        assertEquals(3, infos.size());
        Set<String> uuids;
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Map<Integer, GpuDevice> byIndex = inv.devices().stream()
                    .collect(Collectors.toMap(GpuDevice::index, d -> d));
            for (ExternalResourceInfo i : infos) {
                String idx = i.getProperty("index").orElseThrow();
                assertTrue(idx.matches("\\d+"), "Flink's GPUDriver sets index to a decimal string: " + idx);
                GpuDevice d = byIndex.get(Integer.parseInt(idx));
                assertEquals(d.uuid(), i.getProperty("uuid").orElseThrow());
                for (String k : i.getKeys()) {
                    assertTrue(i.getProperty(k).isPresent(), "key " + k + " listed but absent");
                }
                assertTrue(i.getProperty("no-such-key").isEmpty());
            }
            uuids = infos.stream().map(i -> i.getProperty("uuid").orElseThrow()).collect(Collectors.toSet());
        }
        assertEquals(3, uuids.size(), "distinct GPUs");
        assertEquals(3, held(state), "the ledger holds exactly what the driver returned");
    }

    @Test
    void zeroAndNegativeAmountsAreRefusedAndAllocateNothing() throws Exception {
        Path state = state();
        ExternalResourceDriver d = driver(state);
        // Flink's own GPUDriver: checkArgument(gpuAmount > 0) -> IllegalArgumentException
        assertThrows(IllegalArgumentException.class, () -> d.retrieveResourceInfo(-1));
        assertThrows(IllegalArgumentException.class, () -> d.retrieveResourceInfo(0));
        assertEquals(0, held(state));
    }

    @Test
    void hugeAmountIsRefusedWithGpuschedsReasonAndAllocatesNothing() throws Exception {
        Path state = state();
        ExternalResourceDriver d = driver(state);
        Exception e = assertThrows(Exception.class, () -> d.retrieveResourceInfo(Long.MAX_VALUE));
        assertTrue(e instanceof IllegalArgumentException || e instanceof IllegalStateException, e.toString());
        Exception e9 = assertThrows(IllegalStateException.class, () -> d.retrieveResourceInfo(9));
        String m9 = String.valueOf(e9.getMessage());
        assertTrue(m9.contains("gpusched") && m9.contains("NODE_TOO_SMALL"), m9);
        assertEquals(0, held(state));
    }

    @Test
    void twoDriversInOneJvmNeverShareAGpu() throws Exception {
        Path state = state();
        Set<? extends ExternalResourceInfo> a = driver(state).retrieveResourceInfo(4);
        Set<? extends ExternalResourceInfo> b = driver(state).retrieveResourceInfo(4);
        Set<String> ua = a.stream().map(i -> i.getProperty("uuid").orElseThrow()).collect(Collectors.toSet());
        Set<String> ub = b.stream().map(i -> i.getProperty("uuid").orElseThrow()).collect(Collectors.toSet());
        Set<String> both = new HashSet<>(ua);
        both.retainAll(ub);
        assertEquals(Set.of(), both, "two TaskManagers of one JVM got the same GPUs: " + ua + " / " + ub);
        assertThrows(IllegalStateException.class, () -> driver(state).retrieveResourceInfo(1),
                "all 8 GPUs are held");
    }

    @Test
    void badParametersNameTheKeyAndWhatIsValid() throws Exception {
        Path state = state();
        for (String[] kv : new String[][]{{"strategy", "bogus", "topology"}, {"memory-per-gpu", "lots", "16"},
            {"inventory", "bogus", "auto"}}) {
            Configuration p = new Configuration();
            p.setString("state-dir", state.toString());
            p.setString("inventory", "simulated:dgx1-v100");
            p.setString(kv[0], kv[1]);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new GpuschedDriverFactory().createExternalResourceDriver(p).retrieveResourceInfo(1),
                    kv[0] + "=" + kv[1]);
            String m = String.valueOf(e.getMessage());
            assertTrue(m.contains(kv[0]) && m.contains(kv[1]) && m.contains(kv[2]), m);
        }
        assertEquals(0, held(state));
    }

    /** The config.yaml block of README's Flink section, loaded by Flink's own loader, as pasted. */
    @Test
    void readmeConfigYamlLinesWorkAsPasted() throws Exception {
        String text = Files.readString(java.nio.file.Paths.get("..", "README.md"));
        int sec = text.indexOf("### Flink (`gpu-flink`)");
        assertTrue(sec >= 0, "README has a Flink section");
        int start = text.indexOf("```yaml\n", sec) + 8;
        String block = text.substring(start, text.indexOf("```", start));
        Path state = state();
        String pasted = block.replace("/var/lib/gpusched", state.toString())
                .replaceAll("(?m)^(external-resource\\.gpu\\.param\\.inventory:\\s*)auto", "$1simulated:dgx1-v100");
        Path dir = Files.createDirectories(tmp.resolve("conf"));
        Files.writeString(dir.resolve("config.yaml"), pasted);
        Configuration all = org.apache.flink.configuration.GlobalConfiguration.loadConfiguration(dir.toString());
        assertEquals(GpuschedDriverFactory.class.getName(),
                all.toMap().get("external-resource.gpu.driver-factory.class"), all.toMap().toString());
        Configuration params = new Configuration();
        String prefix = "external-resource.gpu.param.";
        all.toMap().forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                params.setString(k.substring(prefix.length()), v);
            }
        });
        long amount = Long.parseLong(all.toMap().get("external-resource.gpu.amount"));
        Set<? extends ExternalResourceInfo> infos = new GpuschedDriverFactory().createExternalResourceDriver(params)
                .retrieveResourceInfo(amount);
        assertEquals(amount, infos.size());
        assertEquals(amount, held(state));
    }

    @Test
    void recordRejectsNonsense() {
        GpuschedGpuInfo i = new GpuschedGpuInfo(2, "GPU-x", "00000000:07:00.0");
        assertEquals("2", i.getProperty("index").orElseThrow());
        assertEquals(Set.copyOf(GpuschedGpuInfo.KEYS), Set.copyOf(i.getKeys()));
    }
}
