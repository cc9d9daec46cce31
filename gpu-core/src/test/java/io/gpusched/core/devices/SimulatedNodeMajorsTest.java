package io.gpusched.core.devices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A simulated node describes its own device numbers (issue 32): every built-in profile and description carries
 * {@code char_majors} (defaults by vendor, or the description's own, {@code {}} for none), and the device-node table
 * plans such a node without reading {@code /proc/devices}: two different fixture {@code /proc}s give the same plan.
 */
class SimulatedNodeMajorsTest {
    @TempDir
    Path tmp;

    Path proc(String name, String chars) throws Exception {
        Path p = Files.createDirectories(tmp.resolve(name));
        Files.writeString(p.resolve("devices"), "Character devices:\n195 nvidia\n" + chars + "\nBlock devices:\n");
        return p;
    }

    static String plan(SimulatedGpuInventory inv, Path proc) {
        GpuDeviceNodes t = new GpuDeviceNodes(Path.of("/dev"), proc, false);
        StringBuilder b = new StringBuilder();
        for (GpuDevice d : inv.devices()) {
            DevicePlan p = t.plan("GPU " + d.index(), List.of(d), inv.devices());
            b.append(p.allowed()).append(p.denied()).append(p.vendorMajors()).append('\n');
        }
        return b.toString();
    }

    @Test
    void everyProfilePlansTheSameWhateverTheHostsProcDevices() throws Exception {
        Path a = proc("a", "300 nvidia-uvm\n301 nvidia-caps\n302 kfd\n");
        Path b = proc("b", "");
        for (String profile : NodeDescriptions.PROFILES) {
            try (SimulatedGpuInventory inv = GpuInventories.simulated(profile)) {
                assertThat(plan(inv, a)).as(profile).isEqualTo(plan(inv, b)).doesNotContain("300", "301", "302");
                GpuVendor v = inv.devices().get(0).vendor();
                assertThat(inv.devices()).allSatisfy(d -> assertThat(d.properties())
                        .containsEntry(GpuDeviceNodes.CHAR_MAJORS_PROPERTY,
                                v == GpuVendor.NVIDIA ? "nvidia-caps=235,nvidia-uvm=510" : "kfd=237"));
            }
        }
    }

    @Test
    void aDescriptionsOwnMajorsAndNoneAtAll() throws Exception {
        String node = "node: n\ndefaults: {vendor: NVIDIA, name: A10, memory: 24GiB}\n"
                + "devices:\n  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n";
        Path proc = proc("p", "508 nvidia-uvm\n");
        try (SimulatedGpuInventory own = NodeDescriptions.parse(node + "char_majors: {nvidia-uvm: 499}\n", "own")) {
            DevicePlan p = new GpuDeviceNodes(Path.of("/dev"), proc, false).plan("GPU 0", own.devices(),
                    own.devices());
            assertThat(p.controlNodes()).filteredOn(n -> n.role().equals("uvm")).extracting(DeviceNode::major)
                    .containsExactly(499, 499);
        }
        try (SimulatedGpuInventory none = NodeDescriptions.parse(node + "char_majors: {}\n", "none")) {
            DevicePlan p = new GpuDeviceNodes(Path.of("/dev"), proc, false).plan("GPU 0", none.devices(),
                    none.devices());
            assertThat(p.controlNodes()).filteredOn(n -> n.role().equals("uvm"))
                    .allSatisfy(n -> assertThat(n.numbered()).isFalse()).hasSize(2);
            assertThat(p.notes()).anySatisfy(n -> assertThat(n).contains("the node's own description"));
        }
    }

    @Test
    void badMajorsInADescriptionAreTypedErrorsNamingTheKey() {
        String node = "node: n\ndefaults: {vendor: NVIDIA, name: A10, memory: 24GiB}\n"
                + "devices:\n  - {index: 0, pci_bus_id: \"00000000:17:00.0\"}\n";
        for (String bad : new String[]{"char_majors: {nvidia-uvm: 0}", "char_majors: {nvidia-uvm: 4096}",
            "char_majors: {nvidia-uvm: x}", "char_majors: {\"a b\": 5}", "char_majors: [1]",
            "char_majors: {nvidia-uvm: ~}"}) {
            assertThatThrownBy(() -> NodeDescriptions.parse(node + bad + "\n", "n.yaml")).as(bad)
                    .isExactlyInstanceOf(GpuConfigException.class).hasMessageStartingWith("n.yaml: ")
                    .hasMessageContaining("char_majors");
        }
        String own = "node: n\ndefaults: {vendor: NVIDIA, name: A10, memory: 24GiB}\ndevices:\n"
                + "  - {index: 0, pci_bus_id: \"00000000:17:00.0\", properties: {char_majors: \"nvidia-uvm=1\"}}\n";
        assertThatThrownBy(() -> NodeDescriptions.parse(own, "n.yaml")).isExactlyInstanceOf(GpuConfigException.class)
                .hasMessageContaining("top level");
    }

    @Test
    void devicesThatDescribeDifferentOrInvalidMajorsAreRefusedNamingThem() {
        GpuDevice a = device(0, "nvidia-uvm=500");
        GpuDevice b = device(1, "nvidia-uvm=501");
        GpuDeviceNodes t = new GpuDeviceNodes(Path.of("/dev"), tmp, false);
        assertThatThrownBy(() -> t.plan("GPU 0", List.of(a), List.of(a, b))).isInstanceOf(GpuException.class)
                .hasMessageContaining("GPU 0 and GPU 1 describe different");
        GpuDevice c = device(2, "nvidia-uvm=oops");
        assertThatThrownBy(() -> t.plan("GPU 2", List.of(c), List.of(c))).isInstanceOf(GpuException.class)
                .hasMessageContaining("GPU 2").hasMessageContaining("nvidia-uvm=oops");
    }

    static GpuDevice device(int i, String majors) {
        return GpuDevice.builder().index(i).uuid("GPU-" + i).vendor(GpuVendor.NVIDIA).name("A10")
                .memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:1" + i + ":00.0").minor(i)
                .property(GpuDeviceNodes.CHAR_MAJORS_PROPERTY, majors).build();
    }
}
