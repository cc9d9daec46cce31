package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1 plans every CDI spec, {@code Allocate} answer and fence from a proc root ({@code gpusched.proc.root})
 * read at each plan. {@code CharMajors.read} opens {@code devices} only when it is a regular file ("a FIFO or device
 * planted in a fixture root would block or never end"), but the same plan also reads
 * {@code driver/nvidia-caps/mig-minors} from that root, for every NVIDIA plan, MIG or not, simulated node or not. A
 * FIFO there must not hang the plan (liveness, not speed: the bound is generous).
 */
@Tag("adversarial")
class HostileProcRootPlanAttackTest {
    @TempDir
    Path tmp;

    @Test
    void aFifoAsMigMinorsDoesNotHangThePlanOfASimulatedNodeWithoutMig() throws Exception {
        Path proc = Files.createDirectories(tmp.resolve("proc"));
        Files.writeString(proc.resolve("devices"), "Character devices:\n195 nvidia\n510 nvidia-uvm\n");
        Path caps = Files.createDirectories(proc.resolve("driver/nvidia-caps"));
        Process mk = new ProcessBuilder("mkfifo", caps.resolve("mig-minors").toString()).start();
        assumeTrue(mk.waitFor(30, TimeUnit.SECONDS) && mk.exitValue() == 0, "mkfifo");
        Path fifo = caps.resolve("mig-minors");
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            GpuDevice d = inv.devices().get(0);
            DevicePlan p = assertTimeoutPreemptively(Duration.ofSeconds(30),
                    () -> new GpuDeviceNodes(tmp.resolve("dev"), proc, false).plan("GPU 0", List.of(d),
                            inv.devices()),
                    "the plan of a simulated dgx1-v100 GPU blocks on a FIFO at " + caps.resolve("mig-minors"));
            assertThat(p.allowed()).isNotEmpty();
        } finally {
            // a reader the plan left blocked in open(2) gets its end of file (a writer opens and closes)
            Thread unblock = new Thread(() -> {
                try (OutputStream o = Files.newOutputStream(fifo)) {
                    o.flush();
                } catch (IOException e) {
                    // nothing to unblock
                }
            }, "unblock-fifo");
            unblock.setDaemon(true);
            unblock.start();
            unblock.join(2000);
        }
    }
}
