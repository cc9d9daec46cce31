package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code /dev/nvidia-uvm} and {@code /dev/nvidia-uvm-tools} in CDI specs and container flags (issue 32): every CUDA
 * container needs them, whether or not the {@code nvidia-uvm} module is loaded when the spec is written. A node that
 * does not describe its own majors (a real backend; here a node built device by device) reads them from the fixture
 * {@code /proc/devices}: without the module the nodes are named by path alone (no type, no numbers: the runtime reads
 * them when the container starts), with it they carry the module's major. A simulated node from a description never
 * reads {@code /proc/devices}: its spec is the same bytes on every machine. The checks read the JSON, never the
 * planner's own lists.
 */
class UvmNodesTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    /** Two NVIDIA GPUs (minors 0, 1) of a node that says nothing of its majors, as NVML's inventory does. */
    static SimulatedGpuInventory hostNode() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("host");
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-00000000-0000-0000-0000-00000000000" + i)
                    .vendor(GpuVendor.NVIDIA).name("NVIDIA A10").memory(MemorySize.ofGibibytes(24))
                    .pciBusId("00000000:1" + i + ":00.0").minor(i).build());
        }
        return b.build();
    }

    Path proc(String name, String charDevices) throws IOException {
        Path p = Files.createDirectories(tmp.resolve(name));
        Files.writeString(p.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia\n" + charDevices
                + "\nBlock devices:\n  8 sd\n");
        return p;
    }

    /** @return the spec-wide device nodes by container path */
    static Map<String, JsonNode> controlNodes(CdiSpec spec) throws IOException {
        JsonNode root = JSON.readTree(spec.toJson());
        Map<String, JsonNode> out = new LinkedHashMap<>();
        root.get("containerEdits").get("deviceNodes").forEach(n -> out.put(n.get("path").asText(), n));
        return out;
    }

    @Test
    void withoutTheModuleTheUvmNodesAreInTheSpecByPathOnly() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev")); // and no /dev/nvidia-uvm yet either
        try (GpuInventory inv = hostNode()) {
            CdiSpec s = CdiSpec.of(inv, CdiOptions.defaults().withDevRoot(dev).withProcRoot(proc("proc", ""))).get(0);
            Map<String, JsonNode> nodes = controlNodes(s);
            assertThat(nodes).containsKeys("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools");
            for (String uvm : List.of("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")) {
                JsonNode n = nodes.get(uvm);
                List<String> fields = new ArrayList<>();
                n.fieldNames().forEachRemaining(fields::add);
                // a type or a minor without the major would be read as major 0: path (and where on the host) only
                assertThat(fields).as(n.toString()).containsExactlyInAnyOrder("path", "hostPath", "permissions");
                assertThat(n.get("hostPath").asText()).isEqualTo(dev.resolve(uvm.substring(5)).toString());
            }
            assertThat(nodes.get("/dev/nvidiactl").get("major").asInt()).isEqualTo(195);
            assertThat(s.notes()).anySatisfy(x -> assertThat(x).contains("nvidia-uvm is not in").contains("by path"));
            try (GpuScheduler sched = GpuScheduler.builder().inventory(inv).auditLogging(false)
                    .maintenanceInterval(Duration.ZERO).build()) {
                Allocation a = sched.allocate(GpuRequest.builder().count(1).build());
                ContainerDevices c = ContainerDevices.of(a, inv.devices(), CdiOptions.defaults().withDevRoot(dev)
                        .withProcRoot(tmp.resolve("proc")));
                assertThat(c.dockerArgs()).contains("--device=" + dev.resolve("nvidia-uvm") + ":/dev/nvidia-uvm",
                        "--device=" + dev.resolve("nvidia-uvm-tools") + ":/dev/nvidia-uvm-tools");
            }
        }
    }

    @Test
    void withTheModuleTheUvmNodesCarryItsMajor() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        try (GpuInventory inv = hostNode()) {
            CdiSpec s = CdiSpec.of(inv, CdiOptions.defaults().withDevRoot(dev)
                    .withProcRoot(proc("proc", "511 nvidia-uvm\n"))).get(0);
            Map<String, JsonNode> nodes = controlNodes(s);
            assertThat(nodes.get("/dev/nvidia-uvm").toString()).contains("\"type\":\"c\"", "\"major\":511",
                    "\"minor\":0");
            assertThat(nodes.get("/dev/nvidia-uvm-tools").toString()).contains("\"type\":\"c\"", "\"major\":511",
                    "\"minor\":1");
            assertThat(s.notes()).noneSatisfy(x -> assertThat(x).contains("nvidia-uvm"));
        }
    }

    @Test
    void theSpecIsReadAtEachCallSoAModuleLoadedSinceCounts() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        Path proc = proc("proc", "");
        try (GpuInventory inv = hostNode()) {
            CdiOptions o = CdiOptions.defaults().withDevRoot(dev).withProcRoot(proc);
            assertThat(controlNodes(CdiSpec.of(inv, o).get(0)).get("/dev/nvidia-uvm").has("major")).isFalse();
            proc("proc", "508 nvidia-uvm\n");
            assertThat(controlNodes(CdiSpec.of(inv, o).get(0)).get("/dev/nvidia-uvm").get("major").asInt())
                    .isEqualTo(508);
        }
    }

    @Test
    void aSimulatedNodesSpecIsTheSameBytesWhateverTheHostsProcDevices() throws Exception {
        Path dev = CdiTestNodes.dev(tmp);
        Path withUvm = proc("proc-a", "300 nvidia-uvm\n301 nvidia-caps\n");
        Path without = proc("proc-b", "");
        for (String profile : NodeDescriptions.PROFILES) {
            try (GpuInventory inv = GpuInventories.simulated(profile)) {
                CdiOptions o = CdiOptions.defaults().withDevRoot(dev);
                String a = CdiSpec.of(inv, o.withProcRoot(withUvm)).get(0).toYaml();
                String b = CdiSpec.of(inv, o.withProcRoot(without)).get(0).toYaml();
                assertThat(a).as(profile).isEqualTo(b).doesNotContain("major: 300", "major: 301");
                if (inv.devices().get(0).vendor() == GpuVendor.NVIDIA) {
                    // the profile's own nvidia-uvm major (510 by default), whatever the host says
                    Map<String, JsonNode> nodes = controlNodes(CdiSpec.of(inv, o.withProcRoot(without)).get(0));
                    assertThat(nodes.get("/dev/nvidia-uvm").get("major").asInt()).as(profile).isEqualTo(510);
                }
            }
        }
    }

    @Test
    void aDescriptionGivesItsOwnMajorsOrNoneAtAll() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        Path proc = proc("proc", "508 nvidia-uvm\n");
        String node = "node: n1\ndefaults: {vendor: NVIDIA, name: NVIDIA A10, memory: 24GiB}\n"
                + "devices:\n  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n";
        Path own = Files.writeString(tmp.resolve("own.yaml"), node + "char_majors: {nvidia-uvm: 499}\n");
        Path none = Files.writeString(tmp.resolve("none.yaml"), node + "char_majors: {}\n");
        CdiOptions o = CdiOptions.defaults().withDevRoot(dev).withProcRoot(proc);
        try (GpuInventory inv = GpuInventories.simulated(own.toString())) {
            assertThat(controlNodes(CdiSpec.of(inv, o).get(0)).get("/dev/nvidia-uvm").get("major").asInt())
                    .isEqualTo(499);
        }
        try (GpuInventory inv = GpuInventories.simulated(none.toString())) {
            CdiSpec s = CdiSpec.of(inv, o).get(0);
            JsonNode uvm = controlNodes(s).get("/dev/nvidia-uvm");
            assertThat(uvm.has("major")).as("a node whose module is not loaded, whatever this host has").isFalse();
            assertThat(s.notes()).anySatisfy(x -> assertThat(x).contains("the node's own description"));
        }
    }
}
