package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GpuDeviceNodesTest {

    @Test
    void nvidiaNodesByMinorWithControlAndUvm(@TempDir Path dir) throws Exception {
        Path proc = Fixtures.proc(dir, "195 nvidia-frontend\n  508 nvidia-uvm\n");
        Path dev = Files.createDirectories(dir.resolve("dev"));
        Files.createFile(dev.resolve("nvidia-uvm"));
        SimulatedGpuInventory host = Fixtures.nvidiaHost();
        Allocation a = Fixtures.gpus(Fixtures.scheduler(host), 1, 3);
        DevicePlan p = new GpuDeviceNodes(dev, proc, false).plan(a, host.devices());
        // the module is loaded (its major is in /proc/devices): both uvm nodes with their numbers, made or not yet
        assertThat(p.allowed()).extracting(GpuDeviceNodesTest::show).containsExactly("nvidia1=195:1", "nvidia3=195:3",
                "nvidiactl=195:255", "nvidia-uvm=508:0", "nvidia-uvm-tools=508:1");
        assertThat(p.denied()).extracting(n -> n.minor()).containsExactly(0, 2);
        assertThat(NodePlan.of(p).rules(false, true, List.of())).extracting(DeviceRule::toString).containsExactly(
                "allow c 195:1 rw", "allow c 195:3 rw", "allow c 195:255 rw", "allow c 508:0 rw", "allow c 508:1 rw",
                "deny c 195:0 rwm", "deny c 195:2 rwm", "deny c 195:* rwm");
    }

    /** A node as name=major:minor, "?" for a major not known. */
    static String show(DeviceNode n) {
        return n.path().getFileName() + "=" + (n.numbered() ? String.valueOf(n.major()) : "?") + ":" + n.minor();
    }

    @Test
    void withoutTheUvmModuleTheUvmNodesArePlannedByPathAndFencesHaveNoRuleForThem(@TempDir Path dir)
            throws Exception {
        Path proc = Fixtures.proc(dir, "195 nvidia-frontend\n");
        SimulatedGpuInventory host = Fixtures.nvidiaHost();
        Allocation a = Fixtures.gpus(Fixtures.scheduler(host), 2);
        DevicePlan p = new GpuDeviceNodes(dir.resolve("dev"), proc, false).plan(a, host.devices());
        assertThat(p.allowed()).extracting(GpuDeviceNodesTest::show).containsExactly("nvidia2=195:2",
                "nvidiactl=195:255", "nvidia-uvm=?:0", "nvidia-uvm-tools=?:1");
        assertThat(p.controlNodes()).extracting(n -> n.path().getFileName().toString())
                .contains("nvidia-uvm", "nvidia-uvm-tools");
        assertThat(p.notes()).anySatisfy(n -> assertThat(n).contains("nvidia-uvm is not in").contains("by path"));
        NodePlan np = NodePlan.of(p);
        assertThat(np.allowed()).allSatisfy(n -> assertThat(n.numbered()).isTrue()).hasSize(2);
        assertThat(np.rules(false, true, List.of())).extracting(DeviceRule::toString).containsExactly(
                "allow c 195:2 rw", "allow c 195:255 rw", "deny c 195:0 rwm", "deny c 195:1 rwm", "deny c 195:3 rwm",
                "deny c 195:* rwm");
        assertThat(np.notes()).anySatisfy(n -> assertThat(n).contains("no cgroup rule for").contains("nvidia-uvm"));
    }

    @Test
    void migDevicesGetTheirAccessCaps(@TempDir Path dir) throws Exception {
        Path proc = Fixtures.proc(dir, "195 nvidia-frontend\n  237 nvidia-caps\n");
        Files.createDirectories(proc.resolve("driver/nvidia-caps"));
        Files.writeString(proc.resolve("driver/nvidia-caps/mig-minors"), "config 1\nmonitor 2\ngpu0/gi1/access 12\n"
                + "gpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n");
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("mig");
        for (int gi = 1; gi <= 2; gi++) {
            b.device(GpuDevice.builder().index(gi).uuid("MIG-" + gi).vendor(GpuVendor.NVIDIA).name("A100 MIG 3g.40gb")
                    .memory(MemorySize.ofGibibytes(40)).pciBusId("00000000:07:00.0").minor(0).parentUuid("GPU-p")
                    .property("nvml.index", "0").property("mig.gpu_instance_id", String.valueOf(gi))
                    .property("mig.compute_instance_id", "0").build());
        }
        SimulatedGpuInventory host = b.build();
        Allocation a = Fixtures.gpus(Fixtures.scheduler(host), 2);
        DevicePlan p = new GpuDeviceNodes(dir.resolve("dev"), proc, false).plan(a, host.devices());
        assertThat(p.allowed()).extracting(GpuDeviceNodesTest::show).containsExactly("nvidia0=195:0",
                "nvidiactl=195:255", "nvidia-uvm=?:0", "nvidia-uvm-tools=?:1", "nvidia-cap21=237:21",
                "nvidia-cap22=237:22");
        assertThat(p.denied()).extracting(n -> n.major() + ":" + n.minor()).containsExactly("237:12", "237:13");
        assertThat(p.vendorMajors()).containsExactly(195, 237);
    }

    @Test
    void amdNodesAreKfdAndRenderNodes(@TempDir Path dir) throws Exception {
        // a simulated node's own majors (mi210-8x: kfd 237 by default), never this /proc's 511
        Path proc = Fixtures.proc(dir, "226 drm\n 511 kfd\n");
        SimulatedGpuInventory host = GpuInventories.simulated("mi210-8x");
        GpuScheduler s = Fixtures.scheduler(host);
        Allocation a = Fixtures.gpus(s, 0);
        DevicePlan p = new GpuDeviceNodes(dir.resolve("dev"), proc, false).plan(a, host.devices());
        assertThat(p.allowed()).extracting(n -> n.path().toString().replace(dir.resolve("dev") + "/", "") + "="
                + n.major() + ":" + n.minor())
                .containsExactly("dri/renderD130=226:130", "dri/card2=226:2", "kfd=237:0");
        assertThat(p.denied()).hasSize(14).allSatisfy(n -> assertThat(n.major()).isEqualTo(226));
        assertThat(p.denied()).extracting(n -> n.path().getFileName().toString()).contains("renderD128", "card0")
                .doesNotContain("renderD130", "card2");
        assertThat(p.notes()).anySatisfy(n -> assertThat(n).contains("render minor - 128"));
    }

    @Test
    void amdCardMinorsComeFromThePropertyOrTheUdevLinkBeforeTheConvention(@TempDir Path dir) throws Exception {
        Path proc = Fixtures.proc(dir, "226 drm\n 511 kfd\n");
        Path dev = Files.createDirectories(dir.resolve("dev/dri/by-path"));
        Files.createSymbolicLink(dev.resolve("pci-0000:26:00.0-card"), Path.of("../card7"));
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("amd");
        b.device(GpuDevice.builder().index(0).uuid("0xa0").vendor(GpuVendor.AMD).name("MI210")
                .memory(MemorySize.ofGibibytes(64)).pciBusId("0000:03:00.0").minor(130).property("drm.card_minor", "5")
                .build());
        b.device(GpuDevice.builder().index(1).uuid("0xa1").vendor(GpuVendor.AMD).name("MI210")
                .memory(MemorySize.ofGibibytes(64)).pciBusId("0000:26:00.0").minor(131).build());
        SimulatedGpuInventory host = b.build();
        DevicePlan p =
                new GpuDeviceNodes(dir.resolve("dev"), proc, false).plan(Fixtures.gpus(Fixtures.scheduler(host), 0),
                        host.devices());
        assertThat(p.allowed()).extracting(n -> n.path().getFileName() + "=" + n.minor())
                .containsExactly("renderD130=130", "card5=5", "kfd=0");
        assertThat(p.denied()).extracting(n -> n.path().getFileName() + "=" + n.minor())
                .containsExactly("renderD131=131", "card7=7");
    }

    @Test
    void aDeviceWithoutMinorCannotBeFenced(@TempDir Path dir) throws Exception {
        SimulatedGpuInventory host = SimulatedGpuInventory.builder("nominor").device(GpuDevice.builder().index(0)
                .uuid("GPU-x").vendor(GpuVendor.NVIDIA).name("X").memory(MemorySize.ofGibibytes(1)).pciBusId("b")
                .build()).build();
        Allocation a = Fixtures.scheduler(host).allocate(GpuRequest.builder().build());
        assertThatThrownBy(() -> new GpuDeviceNodes(dir, dir, false).plan(a, host.devices()))
                .isInstanceOf(io.gpusched.core.GpuException.class).hasMessageContaining("has no device minor");
    }
}
