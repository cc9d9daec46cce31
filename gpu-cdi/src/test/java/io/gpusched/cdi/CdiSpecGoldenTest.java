package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.yaml.snakeyaml.Yaml;

/**
 * The CDI spec of every built-in simulated node and the MIG and AMD captures, JSON and YAML, against the files in
 * {@code src/test/resources/golden} (the temporary device root written as {@code <dev>});
 * {@code -Dgpusched.golden.update=true} rewrites them. And the spec's promises, checked on each: every device once by
 * index and once by UUID (MIG also {@code <gpu>:<mig>}), names valid and unique, GPU nodes per device and control
 * nodes spec-wide, {@code all} holds every GPU node, cdiVersion 0.5.0 with no field of a later version, and JSON and
 * YAML say the same.
 */
class CdiSpecGoldenTest {
    @TempDir
    Path tmp;

    @SuppressWarnings("unchecked")
    @ParameterizedTest
    @MethodSource("io.gpusched.cdi.CdiTestNodes#names")
    void specMatchesGoldenAndKeepsItsPromises(String node) throws IOException {
        Path dev = CdiTestNodes.dev(tmp);
        try (GpuInventory inv = CdiTestNodes.open(node)) {
            CdiOptions o = CdiOptions.defaults().withDevRoot(dev).withProcRoot(CdiTestNodes.proc(inv));
            List<CdiSpec> specs = CdiSpec.of(inv, o);
            assertThat(specs).hasSize(1);
            CdiSpec s = specs.get(0);
            for (String format : List.of("json", "yaml")) {
                String text = s.render(format).replace(dev.toString(), "<dev>");
                assertThat(CdiSpec.of(inv, o).get(0).render(format).replace(dev.toString(), "<dev>"))
                        .as("same node, same bytes").isEqualTo(text);
                golden(node + ".cdi." + format, text);
            }
            Map<String, Object> json = new ObjectMapper().readValue(s.toJson(), Map.class);
            Map<String, Object> yaml = new Yaml().load(s.toYaml());
            assertThat(yaml).isEqualTo(json);
            assertThat(json.keySet()).containsExactlyInAnyOrder("cdiVersion", "kind", "devices", "containerEdits");
            assertThat(json.get("cdiVersion")).isEqualTo("0.5.0");
            List<Map<String, Object>> devices = (List<Map<String, Object>>) json.get("devices");
            Set<String> names = new HashSet<>();
            Set<String> allGpuNodes = new HashSet<>();
            Set<String> unionOfDevices = new HashSet<>();
            for (Map<String, Object> d : devices) {
                String name = (String) d.get("name");
                assertThat(names.add(name)).as("unique " + name).isTrue();
                assertThat(name).matches("[A-Za-z0-9][A-Za-z0-9_.:-]*");
                assertThat(d.keySet()).containsExactlyInAnyOrder("name", "containerEdits");
                Map<String, Object> edits = (Map<String, Object>) d.get("containerEdits");
                assertThat(edits.keySet()).containsExactly("deviceNodes");
                for (Map<String, Object> n : (List<Map<String, Object>>) edits.get("deviceNodes")) {
                    String path = (String) n.get("path");
                    assertThat(path).doesNotContain("nvidiactl", "nvidia-uvm", "nvidia-modeset", "/dev/kfd");
                    assertThat(n.get("hostPath")).isEqualTo(path.replaceFirst("^/dev", dev.toString()));
                    (name.equals("all") ? allGpuNodes : unionOfDevices).add(path);
                }
            }
            assertThat(allGpuNodes).isEqualTo(unionOfDevices);
            for (GpuDevice d : inv.devices()) {
                assertThat(names).contains(String.valueOf(d.index()), d.uuid());
            }
            if (node.equals(CdiTestNodes.MIG)) {
                assertThat(names).contains("0:0", "0:1", "0:2", "0:3");
            }
            assertThat(names).hasSize(devices.size()).contains("all");
            Map<String, Object> common = (Map<String, Object>) json.get("containerEdits");
            List<String> control = new ArrayList<>();
            ((List<Map<String, Object>>) common.get("deviceNodes")).forEach(n -> control.add((String) n.get("path")));
            if (s.kind().equals(CdiOptions.NVIDIA_KIND)) {
                assertThat(control).containsExactlyInAnyOrder("/dev/nvidiactl", "/dev/nvidia-uvm",
                        "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset");
                assertThat((List<String>) common.get("env")).containsExactly("CUDA_DEVICE_ORDER=PCI_BUS_ID");
            } else {
                assertThat(control).containsExactly("/dev/kfd");
            }
        }
    }

    private static void golden(String file, String text) throws IOException {
        Path golden = Path.of("src/test/resources/golden").resolve(file);
        if (Boolean.getBoolean("gpusched.golden.update")) {
            Files.createDirectories(golden.getParent());
            Files.writeString(golden, text);
        }
        assertThat(golden).as("golden file " + file + " (create with -Dgpusched.golden.update=true)").exists();
        assertThat(text).isEqualTo(Files.readString(golden, StandardCharsets.UTF_8));
    }
}
