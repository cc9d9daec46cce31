package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.sim.NodeDescriptions;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 14's "found when tried as a hostile user would": each input that escaped as the wrong exception, or was
 * silently accepted, now gets the documented exception naming the input. The fuzz targets
 * ({@code io.gpusched.core.fuzz}) keep these inputs as regression inputs too; these tests state the expectation in
 * words.
 */
class HostileInputTest {

    @ParameterizedTest
    @ValueSource(strings = {"gpu_memory_mb", "gpu_shared_memory_mb"})
    void hugeMemoryInResourcesIsAnIllegalArgumentNamingTheKey(String key) {
        Map<String, Object> r = Map.of("gpu_count", 1, key, 10_000_000_000_000L);
        assertThatThrownBy(() -> GpuRequests.fromResources(r)).isExactlyInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("resources." + key).hasMessageContaining("at most");
    }

    @Test
    void aNullKeyInResourcesIsAnIllegalArgument() {
        Map<String, Object> r = new HashMap<>();
        r.put(null, 1);
        r.put("gpu_count", 1);
        assertThatThrownBy(() -> GpuRequests.fromResources(r)).isExactlyInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("null").hasMessageContaining("gpu_count");
    }

    @Test
    void aRepeatedFlagIsRefusedAsDocumented() {
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=2", "--gpu=2"))
                .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("--gpu given twice");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--gpu=2", "--gpus=3"))
                .hasMessageContaining("given twice");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--target=a", "--target=b"))
                .hasMessageContaining("--target given twice");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--label=team=a", "--label=team=b"))
                .hasMessageContaining("--label given twice for key \"team\"");
        GpuRequest ok = GpuRequests.fromCliFlags("--label=team=a", "--label=site=b");
        assertThat(ok.labels()).containsEntry("team", "a").containsEntry("site", "b");
    }

    @Test
    void zeroSharedAndZeroLeaseNameTheirFlag() {
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--shared=0"))
                .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("--shared=0")
                .hasMessageContaining("more than 0");
        assertThatThrownBy(() -> GpuRequests.fromCliFlags("--lease=0s"))
                .isExactlyInstanceOf(IllegalArgumentException.class).hasMessageContaining("--lease=0s")
                .hasMessageContaining("longer than 0");
    }

    @Test
    void aNulInACudaPathIsAConfigErrorNamingTheKey() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  cuda_paths: [\"/opt/cu\\0da\"]\n", "c.yaml"))
                .isExactlyInstanceOf(GpuConfigException.class).hasMessageContaining("c.yaml: gpu.cuda_paths[0]")
                .hasMessageContaining("\\0");
    }

    @ParameterizedTest
    @ValueSource(strings = {"gpu:\n  max_gpus_per_request: !!int four\n", "gpu:\n  max_gpus_per_request: !!int 0x\n",
        "gpu:\n  strategy: !!binary '???'\n", "gpu:\n  enabled: !!bool maybe\n",
        "gpu:\n  backends: !!set {nvml, procfs}\n", "gpu:\n  strategy: !!timestamp 2001-12-14\n",
        "gpu:\n  rate_limit: {per_owner_per_second: !!float zero}\n"})
    void taggedScalarsAreConfigErrors(String yaml) {
        assertThatThrownBy(() -> GpuConfig.parse(yaml, "c.yaml")).isExactlyInstanceOf(GpuConfigException.class)
                .hasMessageStartingWith("c.yaml: ");
    }

    @Test
    void wellFormedTagsStillWork() {
        GpuConfig c = GpuConfig.parse("gpu:\n  enabled: !!bool false\n  max_gpus_per_request: !!int 4\n"
                + "  backends: !!seq [nvml]\n", "c.yaml");
        assertThat(c.enabled()).isFalse();
        assertThat(c.maxGpusPerRequest()).isEqualTo(4);
        assertThat(c.backends()).containsExactly("nvml");
    }

    @ParameterizedTest
    @ValueSource(strings = {"memory: !!int four", "memory: !!binary '???'", "memory: !!int 0x",
        "memory: 1GiB, numa_node: !!bool maybe"})
    void taggedScalarsInNodeDescriptionsAreConfigErrors(String field) {
        String yaml = "node: n\ndefaults: {vendor: NVIDIA, name: x}\ndevices:\n  - {index: 0, pci_bus_id: a, "
                + field + "}\n";
        assertThatThrownBy(() -> NodeDescriptions.parse(yaml, "n.yaml"))
                .isExactlyInstanceOf(GpuConfigException.class).hasMessageStartingWith("n.yaml: ");
    }

    @Test
    void oversizedFilesAreRefusedBeforeTheyAreRead(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        java.nio.file.Path big = dir.resolve("big.yaml");
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(big.toFile(), "rw")) {
            f.setLength(64L << 20); // sparse: 64 MiB on paper, nothing on disk
        }
        assertThatThrownBy(() -> GpuConfig.load(big)).isExactlyInstanceOf(GpuConfigException.class)
                .hasMessageContaining("big.yaml").hasMessageContaining("at most");
        assertThatThrownBy(() -> NodeDescriptions.load(big)).isExactlyInstanceOf(GpuConfigException.class)
                .hasMessageContaining("big.yaml").hasMessageContaining("at most");
    }

    @Test
    void aNodeDescriptionHasABoundedNumberOfDevices() {
        StringBuilder y = new StringBuilder("node: n\ndefaults: {vendor: NVIDIA, name: x, memory: 1GiB}\ndevices:\n");
        for (int i = 0; i <= NodeDescriptions.MAX_DEVICES; i++) {
            y.append("  - {index: ").append(i).append(", pci_bus_id: b").append(i).append("}\n");
        }
        assertThatThrownBy(() -> NodeDescriptions.parse(y.toString(), "n.yaml"))
                .isExactlyInstanceOf(GpuConfigException.class).hasMessageContaining("at most 1024");
    }
}
