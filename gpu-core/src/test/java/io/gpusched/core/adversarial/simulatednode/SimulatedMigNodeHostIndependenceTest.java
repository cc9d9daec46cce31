package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1: "A simulated node describes its own device numbers ... and never reads the host's." A simulated
 * node with MIG partitions (a node description with {@code parent}, its caps major described by {@code char_majors})
 * is planned on two hosts: one whose {@code /proc} has {@code driver/nvidia-caps/mig-minors} (a real MIG host) and
 * one without. The same simulated node must get the same device nodes on both.
 */
@Tag("adversarial")
class SimulatedMigNodeHostIndependenceTest {
    @TempDir
    Path tmp;

    static final String NODE = """
            node: sim-mig
            defaults: {vendor: NVIDIA, name: A100 MIG 3g.20gb, memory: 20GiB, compute_capability: "8.0"}
            char_majors: {nvidia-uvm: 510, nvidia-caps: 235}
            devices:
              - {index: 0, uuid: MIG-a, parent: GPU-p, minor: 0, pci_bus_id: "00000000:07:00.0",
                 properties: {nvml.index: "0", mig.gpu_instance_id: "1", mig.compute_instance_id: "0"}}
              - {index: 1, uuid: MIG-b, parent: GPU-p, minor: 0, pci_bus_id: "00000000:07:00.0",
                 properties: {nvml.index: "0", mig.gpu_instance_id: "2", mig.compute_instance_id: "0"}}
            """;

    private Path proc(String name, String migMinors) throws Exception {
        Path p = Files.createDirectories(tmp.resolve(name));
        Files.writeString(p.resolve("devices"), "Character devices:\n195 nvidia\n511 nvidia-uvm\n236 nvidia-caps\n"
                + "\nBlock devices:\n");
        if (migMinors != null) {
            Files.createDirectories(p.resolve("driver/nvidia-caps"));
            Files.writeString(p.resolve("driver/nvidia-caps/mig-minors"), migMinors);
        }
        return p;
    }

    private static String show(List<DeviceNode> nodes) {
        StringBuilder b = new StringBuilder();
        for (DeviceNode n : nodes) {
            b.append(n.path().getFileName()).append('=').append(n.numbered() ? n.major() + ":" + n.minor() : "?")
                    .append(' ');
        }
        return b.toString();
    }

    private static String plan(SimulatedGpuInventory inv, Path proc) {
        GpuDeviceNodes t = new GpuDeviceNodes(Path.of("/dev"), proc, false);
        StringBuilder b = new StringBuilder();
        for (GpuDevice d : inv.devices()) {
            DevicePlan p = t.plan("GPU " + d.index(), List.of(d), inv.devices());
            b.append("allowed ").append(show(p.allowed())).append("denied ").append(show(p.denied()))
                    .append(p.vendorMajors()).append('\n');
        }
        return b.toString();
    }

    @Test
    void aSimulatedMigNodePlansTheSameOnAMigHostAndOnAHostWithoutMig() throws Exception {
        Path migHost = proc("mig-host", "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n"
                + "gpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n");
        Path plainHost = proc("plain-host", null);
        try (SimulatedGpuInventory inv = NodeDescriptions.parse(NODE, "sim-mig.yaml")) {
            String onMig = plan(inv, migHost);
            String onPlain = plan(inv, plainHost);
            assertThat(onMig).as("the host's /proc/devices majors are never used").doesNotContain("511", "236");
            assertThat(onMig).as("the same simulated node planned on a MIG host and on a host without MIG")
                    .isEqualTo(onPlain);
        }
    }
}
