package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.Selftest.Check;
import io.gpusched.cli.Selftest.Verdict;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.cuda.CudaDeviceQuery;
import io.gpusched.kubernetes.KubeletDevicePlugin;
import io.gpusched.kubernetes.KubeletProbe;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The self-test's kubernetes check (the real device plug-in against {@link KubeletProbe} on Unix sockets) and its
 * cuda-query check: each passing and each failure path (a plug-in that never registers, one that lists other GPUs,
 * one whose Allocate errs, an answer with the wrong nodes; a driver that disagrees, fails, or is absent). Bounds are
 * timeouts only.
 */
class SelftestKubernetesAndCudaTest {
    @TempDir
    Path tmp;

    private static void epoll() {
        assumeTrue(KubeletProbe.available(), () -> "epoll Unix sockets unavailable: "
                + KubeletProbe.unavailabilityCause());
    }

    private static List<Path> sockets(Path dir) throws Exception {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> p.getFileName().toString().endsWith(".sock")).toList();
        }
    }

    @Test
    void thePlugInRegistersListsTheHealthyGpusAndAllocatesOne() throws Exception {
        epoll();
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        inv.setHealth(6, GpuHealth.unhealthy("XID 79"));
        Check c = Selftest.kubernetes(inv, true, tmp);
        assertThat(c.verdict()).as(c.toString()).isEqualTo(Verdict.PASS);
        assertThat(c.detail()).contains("registered nvidia.com/gpu (API v1beta1)").contains("listed 7 healthy GPUs")
                .contains("/dev/nvidia0").contains("/dev/nvidiactl").contains("/dev/nvidia-uvm")
                .contains("NVIDIA_VISIBLE_DEVICES=" + inv.devices().get(0).uuid()).contains("simulated");
        assertThat(sockets(tmp.resolve("k8s"))).as("the plug-in's and the stand-in's sockets are gone").isEmpty();
    }

    @Test
    void amdGpusAreCheckedWithTheirRenderNodeAndKfd() throws Exception {
        epoll();
        SimulatedGpuInventory inv = GpuInventories.simulated("mi210-8x");
        Check c = Selftest.kubernetes(inv, true, tmp);
        assertThat(c.verdict()).as(c.toString()).isEqualTo(Verdict.PASS);
        assertThat(c.detail()).contains("registered amd.com/gpu").contains("/dev/kfd")
                .contains("/dev/dri/renderD" + inv.devices().get(0).minor().getAsInt());
    }

    @Test
    void aPlugInThatNeverRegistersFails() throws Exception {
        epoll();
        Check c = Selftest.kubernetes(GpuInventories.simulated("dgx1-v100"), true, tmp, (inv, cfg) -> () -> {},
                Duration.ofSeconds(2));
        assertThat(c.verdict()).isEqualTo(Verdict.FAIL);
        assertThat(c.detail()).contains("did not register").contains("kubelet.sock");
        assertThat(c.cause()).isEqualTo("no Register call within 2 s");
        assertThat(c.remedy()).contains("gpusched k8s-device-plugin --verbose");
    }

    @Test
    void aPlugInThatListsOtherGpusFails() throws Exception {
        epoll();
        SimulatedGpuInventory other = GpuInventories.simulated("pcie-4xa10");
        SimulatedGpuInventory node = GpuInventories.simulated("dgx1-v100");
        Check c = Selftest.kubernetes(node, true, tmp, (inv, cfg) -> KubeletDevicePlugin.start(other, cfg),
                Selftest.KUBERNETES_BOUND);
        assertThat(c.verdict()).as(c.toString()).isEqualTo(Verdict.FAIL);
        assertThat(c.detail()).contains("listed 4 healthy devices of nvidia.com/gpu, the node has 8 healthy GPUs");
        assertThat(c.cause()).contains("not listed: ").contains(node.devices().get(0).uuid())
                .contains("listed but not a healthy GPU of the node: ").contains(other.devices().get(0).uuid());
    }

    @Test
    void anAllocateThePlugInRefusesFails() throws Exception {
        epoll();
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("no-minors");
        for (int i = 0; i < 2; i++) { // no device minor: the plug-in cannot name the GPU's node and refuses Allocate
            b.device(GpuDevice.builder().index(i).uuid("GPU-nominor-" + i).vendor(GpuVendor.NVIDIA).name("test GPU")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + (i + 1) + ":00.0").build());
        }
        try (SimulatedGpuInventory inv = b.build()) {
            Check c = Selftest.kubernetes(inv, true, tmp);
            assertThat(c.verdict()).as(c.toString()).isEqualTo(Verdict.FAIL);
            assertThat(c.detail()).isEqualTo("Allocate of GPU 0 (GPU-nominor-0) was refused");
            assertThat(c.cause()).isNotBlank();
        }
    }

    @Test
    void anAllocateAnswerWithTheWrongNodesOrVariablesIsNamed() {
        List<GpuDevice> node = GpuInventories.simulated("dgx1-v100").devices();
        GpuDevice g = node.get(2);
        KubeletProbe.AllocateAnswer bad = new KubeletProbe.AllocateAnswer(List.of("/dev/nvidia" + g.minor()
                .getAsInt(), "/dev/nvidia" + node.get(3).minor().getAsInt(), "/dev/nvidia-uvm"),
                Map.of("NVIDIA_VISIBLE_DEVICES", node.get(3).uuid()));
        assertThat(Selftest.allocateProblems(g, node, bad)).containsExactlyInAnyOrder(
                "neither NVIDIA_VISIBLE_DEVICES nor CUDA_VISIBLE_DEVICES is " + g.uuid(),
                "no device spec for /dev/nvidiactl",
                "a device spec for another GPU's node /dev/nvidia" + node.get(3).minor().getAsInt());
    }

    // ---- cuda-query ----

    private static CudaDeviceQuery.Result answered(List<String> uuids) {
        return new CudaDeviceQuery.Result(CudaDeviceQuery.Status.ANSWERED, uuids, "");
    }

    @Test
    void aCudaQueryThatAgreesPassesAndOneThatDisagreesFails() {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        List<String> uuids = inv.devices().stream().map(GpuDevice::uuid).toList();
        List<List<String>> asked = new ArrayList<>();
        Check ok = Selftest.cudaQuery(inv, false, v -> {
            asked.add(v);
            return answered(v);
        });
        assertThat(ok.verdict()).as(ok.toString()).isEqualTo(Verdict.PASS);
        assertThat(ok.detail()).contains("cuDeviceGetCount 8");
        assertThat(asked).containsExactly(uuids);

        List<String> off = new ArrayList<>(uuids.subList(0, 7));
        off.set(1, "GPU-ffffffff-0000-0000-0000-000000000000");
        Check bad = Selftest.cudaQuery(inv, false, v -> answered(off));
        assertThat(bad.verdict()).isEqualTo(Verdict.FAIL);
        assertThat(bad.cause()).contains("CUDA counts 7 devices, discovery 8")
                .contains("device 1: CUDA GPU-ffffffff-0000-0000-0000-000000000000, discovery " + uuids.get(1))
                .contains("CUDA does not see " + uuids.get(7));
        assertThat(bad.remedy()).contains("nvidia-smi");
    }

    @Test
    void aFailingDriverFailsAndNoDriverOrASimulatedNodeIsSkipped() {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        Check failed = Selftest.cudaQuery(inv, false, v -> new CudaDeviceQuery.Result(
                CudaDeviceQuery.Status.FAILED, List.of(), "cuInit returned 100 (CUDA_ERROR_NO_DEVICE)"));
        assertThat(failed.verdict()).isEqualTo(Verdict.FAIL);
        assertThat(failed.cause()).isEqualTo("cuInit returned 100 (CUDA_ERROR_NO_DEVICE)");
        // the real child, with a library that is not there
        Check none = Selftest.cudaQuery(inv, false, v -> CudaDeviceQuery.run(tmp.resolve("absent/libcuda.so.1")
                .toString(), v, Duration.ofSeconds(120)));
        assertThat(none.verdict()).as(none.toString()).isEqualTo(Verdict.SKIPPED);
        assertThat(none.cause()).contains("no CUDA driver library");
        Check sim = Selftest.cudaQuery(inv, true);
        assertThat(sim.verdict()).isEqualTo(Verdict.SKIPPED);
        assertThat(sim.cause()).contains("simulated");
        assertThat(Selftest.cudaQuery(GpuInventories.simulated("mi210-8x"), false).cause())
                .contains("no whole NVIDIA GPU");
    }
}
