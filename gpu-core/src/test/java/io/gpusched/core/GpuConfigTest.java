package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GpuConfigTest {

    @Test
    void loadsEverySetting(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("gpusched.yaml");
        Files.writeString(f, """
                gpu:
                  enabled: false
                  strategy: spreading
                  backends: [nvml, "simulated:dgx1-v100"]
                  cuda_paths: [/opt/cuda-12.4]
                  max_gpus_per_request: 4
                  allow_sharing: false
                """);
        GpuConfig c = GpuConfig.load(f);
        assertThat(c.enabled()).isFalse();
        assertThat(c.strategy()).isEqualTo("spreading");
        assertThat(c.backends()).containsExactly("nvml", "simulated:dgx1-v100");
        assertThat(c.cudaPaths()).containsExactly(Path.of("/opt/cuda-12.4"));
        assertThat(c.maxGpusPerRequest()).isEqualTo(4);
        assertThat(c.allowSharing()).isFalse();
    }

    @Test
    void emptyDocumentGivesDefaults() {
        assertThat(GpuConfig.parse("", "empty.yaml")).isEqualTo(GpuConfig.defaults());
        assertThat(GpuConfig.parse("gpu: {}", "x.yaml")).isEqualTo(GpuConfig.defaults());
    }

    @Test
    void unknownKeysAreRejectedWithTheirPath() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  stratgey: packing\n", "gpusched.yaml"))
                .isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("gpusched.yaml: gpu.stratgey: unknown key")
                .hasMessageContaining("strategy");
        assertThatThrownBy(() -> GpuConfig.parse("gpus: {}", "g.yaml")).hasMessageContaining("g.yaml: gpus");
    }

    @Test
    void badValuesNameThePathAndTheValidValues() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {strategy: random}", "g.yaml"))
                .hasMessageContaining("gpu.strategy").hasMessageContaining("packing");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {enabled: maybe}", "g.yaml"))
                .hasMessageContaining("gpu.enabled: must be true or false");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {max_gpus_per_request: -1}", "g.yaml"))
                .hasMessageContaining("gpu.max_gpus_per_request");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {backends: {a: 1}}", "g.yaml"))
                .hasMessageContaining("gpu.backends: must be a list");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: [1, 2]", "g.yaml"))
                .hasMessageContaining("gpu must be a mapping");
        assertThatThrownBy(() -> GpuConfig.parse("gpu: {enabled: true, enabled: false}", "g.yaml"))
                .hasMessageContaining("not valid YAML");
        assertThatThrownBy(() -> GpuConfig.load(Path.of("/nonexistent/gpusched.yaml")))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("cannot read");
    }

    @Test
    void builderValidates() {
        assertThatThrownBy(() -> GpuConfig.builder().strategy("best").build()).hasMessageContaining("gpu.strategy");
        assertThatThrownBy(() -> GpuConfig.builder().backends(List.of(" ")).build()).hasMessageContaining("blank");
    }
}
