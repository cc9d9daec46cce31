package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1: a described MIG partition whose ids the driver's table cannot hold (gi 15, ci 8, nvml.index 40) or
 * that are spelled as no driver writes them ({@code "01"}) is accepted, and its access caps are dropped with only a
 * plan note: its CDI spec and fence lack the caps a MIG job needs (issue 32: "never a silent omission").
 */
@Tag("adversarial")
class MigCapOutOfTableAttackTest {
    @TempDir
    Path tmp;

    private static String node(String a, String b) {
        return """
                node: sim-mig
                defaults: {vendor: NVIDIA, name: A100 MIG 3g.20gb, memory: 20GiB, compute_capability: "8.0"}
                char_majors: {nvidia-uvm: 510, nvidia-caps: 235}
                devices:
                """ + a + b;
    }

    private static String mig(int index, String uuid, String parent, int minor, int bus, String gpu, String gi,
            String ci) {
        return "  - {index: " + index + ", uuid: " + uuid + ", parent: " + parent + ", minor: " + minor
                + ", pci_bus_id: \"00000000:0" + bus + ":00.0\",\n     properties: {nvml.index: \"" + gpu
                + "\", mig.gpu_instance_id: \"" + gi + "\", mig.compute_instance_id: \"" + ci + "\"}}\n";
    }

    private Set<Integer> caps(SimulatedGpuInventory inv, int i) {
        DevicePlan p = new GpuDeviceNodes(Path.of("/dev"), tmp, false).plan("GPU " + i, List.of(inv.devices().get(i)),
                inv.devices());
        Set<Integer> out = new TreeSet<>();
        for (DeviceNode n : p.allowed()) {
            if (n.role().equals("mig-cap")) {
                out.add(n.minor());
            }
        }
        return out;
    }

    /**
     * A MIG device whose ids the driver's table cannot hold (gi 15, ci 8), or spelled as no driver writes them
     * ({@code "01"}), is either refused (naming the device) or gets its two caps; as shipped it is accepted and its
     * caps are dropped with only a plan note, so a container or fence for it lacks its access caps.
     */
    @Test
    void outOfTableOrMisspelledMigIdsAreRefusedNotSilentlyLeftWithoutCaps() {
        String[][] cases = {{"0", "15", "0"}, {"0", "1", "8"}, {"01", "1", "0"}, {"0", "01", "0"}, {"40", "1", "0"}};
        List<String> dropped = new ArrayList<>();
        for (String[] k : cases) {
            String desc = node(mig(0, "MIG-a", "GPU-p", 0, 7, k[0], k[1], k[2]), mig(1, "MIG-b", "GPU-p", 0, 7, "0",
                    "2", "0"));
            String what = "nvml.index " + k[0] + ", gi " + k[1] + ", ci " + k[2];
            SimulatedGpuInventory inv;
            try {
                inv = NodeDescriptions.parse(desc, "sim-mig.yaml");
            } catch (RuntimeException refused) {
                assertThat(refused.getMessage()).as(what).containsAnyOf("MIG-a", "index 0");
                continue;
            }
            try (inv) {
                Set<Integer> c;
                try {
                    c = caps(inv, 0);
                } catch (RuntimeException refused) {
                    assertThat(refused.getMessage()).as(what).containsAnyOf("MIG-a", "GPU 0");
                    continue;
                }
                if (c.size() != 2) {
                    dropped.add(what + ": accepted, caps " + c);
                }
            }
        }
        assertThat(dropped).as("MIG devices accepted with their access caps dropped (only a plan note)").isEmpty();
    }
}
