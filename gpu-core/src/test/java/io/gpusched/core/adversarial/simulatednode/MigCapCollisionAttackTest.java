package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1 (a simulated node's MIG access caps numbered by the driver's {@code mig-minors} formula from the
 * description's {@code nvml.index}, {@code mig.gpu_instance_id} and {@code mig.compute_instance_id}), attacked as issue
 * 36 item 6 attacked minors ("A node description can make a fence open another GPU ... Refuse each, naming the
 * devices"): two partitions, of two GPUs or of one, that claim the same GPU index and instance ids are accepted, and
 * the fence of each opens the other's access caps.
 */
@Tag("adversarial")
class MigCapCollisionAttackTest {
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
     * Either the description is refused naming both partitions, or the two partitions' fences open different caps.
     * As shipped: accepted, and both fences open the same caps (gpu0/gi1 and its ci0: 12 and 13).
     */
    private void refusedOrApart(String description) {
        SimulatedGpuInventory inv;
        try {
            inv = NodeDescriptions.parse(description, "sim-mig.yaml");
        } catch (RuntimeException refused) {
            assertThat(refused.getMessage()).as("the refusal names the partitions").containsAnyOf("MIG-a", "MIG-c",
                    "index 0", "index 1");
            return;
        }
        try (inv) {
            Set<Integer> a = caps(inv, 0);
            Set<Integer> c = caps(inv, 1);
            assertThat(a).as("MIG-a's caps").isNotEmpty();
            assertThat(c).as("MIG-c's caps, which must not be MIG-a's (%s): a fence for MIG-c then opens MIG-a", a)
                    .doesNotContainAnyElementsOf(a);
        }
    }

    @Test
    void twoPartitionsOfDifferentGpusClaimingOneGpuIndexAndInstanceDoNotShareCaps() {
        refusedOrApart(node(mig(0, "MIG-a", "GPU-p", 0, 7, "0", "1", "0"), mig(1, "MIG-c", "GPU-q", 1, 8, "0", "1",
                "0")));
    }

    @Test
    void twoPartitionsOfOneGpuWithTheSameInstanceIdsDoNotShareCaps() {
        refusedOrApart(node(mig(0, "MIG-a", "GPU-p", 0, 7, "0", "1", "0"), mig(1, "MIG-c", "GPU-p", 0, 7, "0", "1",
                "0")));
    }
}
