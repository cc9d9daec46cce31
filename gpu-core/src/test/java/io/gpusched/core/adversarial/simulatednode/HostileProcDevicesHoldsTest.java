package io.gpusched.core.adversarial.simulatednode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32 item 1, attacks that hold: a real (not simulated) NVIDIA GPU planned over hostile {@code /proc/devices}
 * contents under a fixture proc root. The uvm nodes are always there by path, numbered only from a well-formed
 * character-device line; a link to {@code /dev/zero}, a FIFO, a huge file, CRLF lines, a block-device line and a
 * second uvm line never hang the plan nor give a wrong major.
 */
@Tag("adversarial")
class HostileProcDevicesHoldsTest {
    @TempDir
    Path tmp;

    static final GpuDevice GPU = GpuDevice.builder().index(0).uuid("GPU-host-0").vendor(GpuVendor.NVIDIA)
            .name("NVIDIA A10").memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:17:00.0").minor(0).build();

    private String uvm(Path proc) {
        DevicePlan p = assertTimeoutPreemptively(Duration.ofSeconds(30),
                () -> new GpuDeviceNodes(tmp.resolve("dev"), proc, false).plan("GPU 0", List.of(GPU), List.of(GPU)));
        StringBuilder b = new StringBuilder();
        for (DeviceNode n : p.allowed()) {
            if (n.role().equals("uvm")) {
                b.append(n.path().getFileName()).append('=').append(n.numbered() ? n.major() + ":" + n.minor() : "?")
                        .append(' ');
            }
        }
        return b.toString().trim();
    }

    private Path root(String name) throws Exception {
        return Files.createDirectories(tmp.resolve(name));
    }

    @Test
    void hostileProcDevicesNeverHangNorMisnumberTheUvmNodes() throws Exception {
        Path zero = root("zero");
        Files.createSymbolicLink(zero.resolve("devices"), Path.of("/dev/zero"));
        assertThat(uvm(zero)).isEqualTo("nvidia-uvm=? nvidia-uvm-tools=?");

        Path fifo = root("fifo");
        Process mk = new ProcessBuilder("mkfifo", fifo.resolve("devices").toString()).start();
        assumeTrue(mk.waitFor(30, TimeUnit.SECONDS) && mk.exitValue() == 0, "mkfifo");
        assertThat(uvm(fifo)).isEqualTo("nvidia-uvm=? nvidia-uvm-tools=?");

        Path huge = root("huge");
        Files.writeString(huge.resolve("devices"), "Character devices:\n" + "  1 mem\n".repeat(20_000)
                + "510 nvidia-uvm\n");
        assertThat(uvm(huge)).as("past the 64 KiB read").isEqualTo("nvidia-uvm=? nvidia-uvm-tools=?");

        Path crlf = root("crlf");
        Files.writeString(crlf.resolve("devices"), "Character devices:\r\n195 nvidia\r\n 509 nvidia-uvm\r\n\r\n"
                + "Block devices:\r\n508 nvidia-uvm\r\n");
        assertThat(uvm(crlf)).isEqualTo("nvidia-uvm=509:0 nvidia-uvm-tools=509:1");

        Path twice = root("twice");
        Files.writeString(twice.resolve("devices"), "Block devices:\n400 nvidia-uvm\nCharacter devices:\n"
                + "0 nvidia-uvm\n4096 nvidia-uvm\n-5 nvidia-uvm\n99999 nvidia-uvm\n507 nvidia-uvm\n506 nvidia-uvm\n");
        assertThat(uvm(twice)).isEqualTo("nvidia-uvm=507:0 nvidia-uvm-tools=507:1");
    }
}
