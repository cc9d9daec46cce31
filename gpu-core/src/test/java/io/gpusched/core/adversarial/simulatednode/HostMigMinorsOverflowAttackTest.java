package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.devices.GpuDeviceNodes;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1, "a real host reads mig-minors only when it has MIG devices": a host (not described) MIG node whose
 * {@code /proc/driver/nvidia-caps/mig-minors} holds a number too large for an int makes every plan throw an unchecked
 * {@code NumberFormatException} (the other malformed lines are skipped).
 */
@Tag("adversarial")
class HostMigMinorsOverflowAttackTest {
    @TempDir
    Path tmp;

    /**
     * A host (not described) MIG node reads {@code mig-minors}; a line whose number does not fit an int is skipped
     * like any other malformed line (or refused with a typed error), never a {@code NumberFormatException}.
     */
    @Test
    void aHostMigMinorsLineTooLargeForAnIntIsNotAnUncheckedCrash() throws Exception {
        Path proc = Files.createDirectories(tmp.resolve("proc"));
        Files.writeString(proc.resolve("devices"), "Character devices:\n195 nvidia\n510 nvidia-uvm\n235 nvidia-caps\n");
        Files.createDirectories(proc.resolve("driver/nvidia-caps"));
        Files.writeString(proc.resolve("driver/nvidia-caps/mig-minors"), "config 1\nmonitor 2\ngpu0/gi1/access 12\n"
                + "gpu0/gi1/ci0/access 13\ngpu0/gi2/access 99999999999\n");
        GpuDevice mig = GpuDevice.builder().index(0).uuid("MIG-host-a").vendor(GpuVendor.NVIDIA).name("A100 MIG")
                .memory(MemorySize.ofGibibytes(20)).pciBusId("00000000:17:00.0").minor(0).parentUuid("GPU-host")
                .properties(Map.of("nvml.index", "0", "mig.gpu_instance_id", "1", "mig.compute_instance_id", "0"))
                .build();
        Throwable t = catchThrowable(() -> new GpuDeviceNodes(tmp.resolve("dev"), proc, false).plan("GPU 0",
                List.of(mig), List.of(mig)));
        // skipped (the plan goes on) or refused typed; null means it was skipped, which AssertJ's
        // isNotInstanceOf would not accept
        if (t != null) {
            assertThat(t).as("plan over a mig-minors line 'gpu0/gi2/access 99999999999'")
                    .isNotInstanceOf(NumberFormatException.class);
        }
    }
}
