package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** A 4-GPU NVIDIA host (minors 0..3) and the /proc files the planner reads. */
final class Fixtures {
    private Fixtures() {
    }

    static SimulatedGpuInventory nvidiaHost() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("iso");
        for (int i = 0; i < 4; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-iso-" + i).vendor(GpuVendor.NVIDIA).name("NVIDIA A10")
                    .memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:1" + i + ":00.0").minor(i).build());
        }
        return b.build();
    }

    static GpuScheduler scheduler(SimulatedGpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).auditLogging(false).build();
    }

    static Allocation gpus(GpuScheduler s, Integer... indices) {
        return s.allocate(GpuRequest.builder().deviceIndices(List.of(indices)).build());
    }

    static Path proc(Path dir, String devices) throws Exception {
        Path p = Files.createDirectories(dir.resolve("proc"));
        Files.writeString(p.resolve("devices"), "Character devices:\n  1 mem\n  5 /dev/tty\n" + devices
                + "\nBlock devices:\n  8 sd\n");
        return p;
    }
}
