package io.gpusched.core.adversarial.input;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * YAML 1.1's other number forms and values of the wrong kind in configuration files (issue 36, rough edges):
 * {@code max_gpus_per_request: 010} was read as octal 8 and {@code cuda_paths: [5, true]} was accepted. A number is a
 * number only in plain decimal; any other form is refused where a number is meant (naming the key and saying why) and
 * kept as written where text is meant; numbers and booleans are refused where text (a path, a name) is meant.
 */
@Tag("adversarial")
class YamlNumberAndTextFormsTest {

    @ParameterizedTest
    @ValueSource(strings = {"010", "0x10", "0o10", "1_0", "0b11", "1:30", "+0x1"})
    void aWholeNumberSettingInAnotherFormThanPlainDecimalIsRefusedNamingIt(String v) {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  max_gpus_per_request: " + v + "\n", "g.yaml"))
                .isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("gpu.max_gpus_per_request").hasMessageContaining(v);
    }

    @Test
    void plainDecimalNumbersStillRead() {
        assertThat(GpuConfig.parse("gpu:\n  max_gpus_per_request: 10\n", "g.yaml").maxGpusPerRequest()).isEqualTo(10);
        assertThat(GpuConfig.parse("gpu:\n  max_gpus_per_request: 0\n", "g.yaml").maxGpusPerRequest()).isZero();
        assertThat(GpuConfig.parse("gpu:\n  rate_limit: {per_owner_per_second: 2.5, burst: 3}\n", "g.yaml")
                .rateLimitPerSecond()).isEqualTo(2.5);
    }

    @Test
    void theOctalFormSaysWhyItIsRefused() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  max_gpus_per_request: 010\n", "g.yaml"))
                .hasMessageContaining("plain decimal").hasMessageContaining("octal");
    }

    @ParameterizedTest
    @ValueSource(strings = {"[5, true]", "[/opt/cuda, 5]", "[true]", "5", "[1.5]"})
    void cudaPathsThatAreNotTextAreRefused(String v) {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  cuda_paths: " + v + "\n", "g.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.cuda_paths");
    }

    @Test
    void backendsThatAreNotTextAreRefusedAndQuotedOnesAreText() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  backends: [nvml, 7]\n", "g.yaml"))
                .hasMessageContaining("gpu.backends[1]");
        assertThat(GpuConfig.parse("gpu:\n  cuda_paths: [\"/opt/cuda\", \"5\"]\n", "g.yaml").cudaPaths())
                .containsExactly(Path.of("/opt/cuda"), Path.of("5"));
    }

    @Test
    void textThatYamlWouldReadAsAnotherNumberFormIsKeptAsWritten() throws Exception {
        // an unquoted PCI bus id is a YAML 1.1 sexagesimal float; a uuid of digits with a leading zero is octal
        try (GpuInventory inv = NodeDescriptions.parse("node: n\ndevices:\n  - {index: 0, vendor: NVIDIA, name: x,"
                + " memory: 1GiB, uuid: GPU-1, pci_bus_id: 0000:07:00.0, driver_version: 0550}\n", "n.yaml")) {
            assertThat(inv.devices().get(0).pciBusId()).isEqualTo("0000:07:00.0");
            assertThat(inv.devices().get(0).driverVersion()).contains("0550");
        }
        assertThatThrownBy(() -> NodeDescriptions.parse("node: n\ndevices:\n  - {index: 010, vendor: NVIDIA,"
                + " name: x, memory: 1GiB, pci_bus_id: \"0000:07:00.0\"}\n", "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("index");
    }

    @Test
    void maxSharedPerGpuHasASaneDefaultAndABound() {
        assertThat(GpuConfig.defaults().maxSharedPerGpu()).isEqualTo(48);
        assertThat(GpuConfig.parse("gpu:\n  max_shared_per_gpu: 4\n", "g.yaml").maxSharedPerGpu()).isEqualTo(4);
        for (String v : new String[]{"0", "-1", "4097", "many"}) {
            assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  max_shared_per_gpu: " + v + "\n", "g.yaml"))
                    .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.max_shared_per_gpu");
        }
        assertThatThrownBy(() -> GpuConfig.builder().maxSharedPerGpu(0).build())
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("1 to 4096");
    }
}
