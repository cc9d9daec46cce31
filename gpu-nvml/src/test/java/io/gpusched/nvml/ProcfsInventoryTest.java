package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.MemorySize;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProcfsInventoryTest {

    static final String PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32"
            + " UTC 2023\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
    static final String OPEN = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build "
            + " (dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\nGCC version:  gcc version 12.3.0\n";

    static void gpu(Path proc, String bus, String model, String uuid, String minor) throws Exception {
        Path d = Files.createDirectories(proc.resolve("driver/nvidia/gpus").resolve(bus));
        Files.writeString(d.resolve("information"), "Model: \t\t " + model + "\nIRQ:   \t\t 150\nGPU UUID: \t "
                + uuid + "\nVideo BIOS: \t 88.00.4f.00.09\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
                + "DMA Mask: \t 0x7fffffffffff\nBus Location: \t " + bus + "\nDevice Minor: \t " + minor
                + "\nGPU Excluded:\t No\n");
    }

    @Test
    void parsesBothKernelModuleBanners() {
        assertThat(io.gpusched.core.internal.NvidiaDriver.parseBanner(PROPRIETARY)).contains("535.129.03");
        assertThat(io.gpusched.core.internal.NvidiaDriver.parseBanner(OPEN)).contains("550.54.14");
        assertThat(io.gpusched.core.internal.NvidiaDriver.parseBanner("garbage")).isEmpty();
    }

    @Test
    void readsGpusInBusOrderWithMinorsAndNuma(@TempDir Path root) throws Exception {
        Path proc = root.resolve("proc");
        Path sys = root.resolve("sys");
        Files.createDirectories(proc.resolve("driver/nvidia"));
        Files.writeString(proc.resolve("driver/nvidia/version"), OPEN);
        gpu(proc, "0000:86:00.0", "Tesla V100-SXM2-32GB", "GPU-11111111-0000-4000-8000-000000000086", "0");
        gpu(proc, "0000:06:00.0", "Tesla V100-SXM2-32GB", "GPU-11111111-0000-4000-8000-000000000006", "1");
        gpu(proc, "0000:07:00.0", "NVIDIA A10", "GPU-11111111-0000-4000-8000-000000000007", "2");
        Files.createDirectories(proc.resolve("driver/nvidia/gpus/0000:08:00.0"));
        Files.writeString(proc.resolve("driver/nvidia/gpus/0000:08:00.0/information"), "garbage without fields");
        Path numa = Files.createDirectories(sys.resolve("bus/pci/devices/0000:86:00.0"));
        Files.writeString(numa.resolve("numa_node"), "1\n");
        ProcfsInventoryProvider p = new ProcfsInventoryProvider(proc, sys);
        assertThat(p.unavailabilityCause()).isEmpty();
        try (GpuInventory inv = p.open(null)) {
            List<GpuDevice> d = inv.devices();
            assertThat(d).extracting(GpuDevice::pciBusId)
                    .containsExactly("00000000:06:00.0", "00000000:07:00.0", "00000000:86:00.0");
            assertThat(d.get(0).minor()).hasValue(1);
            assertThat(d.get(0).memory()).isEqualTo(MemorySize.ofGibibytes(32));
            assertThat(d.get(1).memory()).isEqualTo(MemorySize.ZERO);
            assertThat(d.get(1).properties()).containsEntry("memory_source", "unknown");
            assertThat(d.get(2).numaNode()).hasValue(1);
            assertThat(d.get(0).numaNode()).isEmpty();
            assertThat(d.get(0).driverVersion()).contains("550.54.14");
            assertThat(inv.sample().metrics()).allSatisfy(m -> assertThat(m.utilizationPercent()).isEmpty());
        }
    }

    @Test
    void unavailableWithoutTheModule(@TempDir Path root) {
        assertThat(new ProcfsInventoryProvider(root, root).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).startsWith("NVIDIA kernel module not loaded"));
    }

    @Test
    void memoryFromModelName() {
        assertThat(ProcDriverNvidia.memoryFromModel("NVIDIA H100 80GB HBM3")).hasValue(80);
        assertThat(ProcDriverNvidia.memoryFromModel("Tesla V100-SXM2-32GB")).hasValue(32);
        assertThat(ProcDriverNvidia.memoryFromModel("NVIDIA A100-SXM4-80GB")).hasValue(80);
        assertThat(ProcDriverNvidia.memoryFromModel("NVIDIA GeForce RTX 3080")).isEmpty();
    }
}
