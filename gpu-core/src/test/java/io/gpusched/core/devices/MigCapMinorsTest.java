package io.gpusched.core.devices;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The driver's {@code mig-minors} formula, checked against lines of a real table. */
class MigCapMinorsTest {
    @Test
    void minorsFollowTheDriversTable() {
        // lines of /proc/driver/nvidia-caps/mig-minors as the driver writes them
        assertThat(GpuDeviceNodes.migCapMinor(0, 0, -1)).isEqualTo(3); // gpu0/gi0/access 3
        assertThat(GpuDeviceNodes.migCapMinor(0, 0, 0)).isEqualTo(4); // gpu0/gi0/ci0/access 4
        assertThat(GpuDeviceNodes.migCapMinor(0, 0, 7)).isEqualTo(11); // gpu0/gi0/ci7/access 11
        assertThat(GpuDeviceNodes.migCapMinor(0, 1, -1)).isEqualTo(12); // gpu0/gi1/access 12
        assertThat(GpuDeviceNodes.migCapMinor(0, 2, 0)).isEqualTo(22); // gpu0/gi2/ci0/access 22
        assertThat(GpuDeviceNodes.migCapMinor(1, 0, -1)).isEqualTo(138); // gpu1/gi0/access 138
        assertThat(GpuDeviceNodes.migCapMinor(31, 14, 7)).isEqualTo(4322); // the table's last line
    }

    @Test
    void aDescribedMigNodeGetsItsOwnCapsWithNoProcAtAll(@TempDir Path noProc) throws Exception {
        String node = """
                node: sim-mig
                defaults: {vendor: NVIDIA, name: A100 MIG 3g.20gb, memory: 20GiB, compute_capability: "8.0"}
                char_majors: {nvidia-uvm: 510, nvidia-caps: 235}
                devices:
                  - {index: 0, uuid: MIG-a, parent: GPU-p, minor: 0, pci_bus_id: "00000000:07:00.0",
                     properties: {nvml.index: "1", mig.gpu_instance_id: "1", mig.compute_instance_id: "0"}}
                  - {index: 1, uuid: MIG-b, parent: GPU-p, minor: 0, pci_bus_id: "00000000:07:00.0",
                     properties: {nvml.index: "1", mig.gpu_instance_id: "2", mig.compute_instance_id: "3"}}
                """;
        try (SimulatedGpuInventory inv = NodeDescriptions.parse(node, "sim-mig.yaml")) {
            GpuDevice b = inv.devices().get(1);
            DevicePlan p = new GpuDeviceNodes(Path.of("/dev"), noProc, false).plan("GPU 1", List.of(b), inv.devices());
            // gpu1/gi2/access = 3 + 135 + 18, gpu1/gi2/ci3/access = 4 + 135 + 18 + 3
            assertThat(p.allowed()).filteredOn(n -> n.role().equals("mig-cap"))
                    .extracting(n -> n.path().getFileName() + "=" + n.major() + ":" + n.minor())
                    .containsExactly("nvidia-cap156=235:156", "nvidia-cap160=235:160");
            assertThat(p.denied()).extracting(n -> n.major() + ":" + n.minor()).contains("235:147", "235:148")
                    .doesNotContain("235:156", "235:160").hasSize(135 - 2);
            assertThat(p.vendorMajors()).containsExactly(GpuDeviceNodes.NVIDIA_MAJOR, 235);
        }
    }

    @Test
    void idsOutsideTheTableAreRefused() {
        assertThatThrownBy(() -> GpuDeviceNodes.migCapMinor(32, 0, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("gpu 0-31");
        assertThatThrownBy(() -> GpuDeviceNodes.migCapMinor(0, 15, 0)).hasMessageContaining("gi 0-14");
        assertThatThrownBy(() -> GpuDeviceNodes.migCapMinor(0, 0, 8)).hasMessageContaining("ci 0-7");
    }
}
