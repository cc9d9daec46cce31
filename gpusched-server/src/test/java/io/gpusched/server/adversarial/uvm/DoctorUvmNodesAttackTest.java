package io.gpusched.server.adversarial.uvm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.server.DoctorReport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 32: {@code doctor} says when uvm is absent and what it means. What a CUDA program opens is a character device
 * with the module's numbers; the doctor line is checked against {@code /dev} entries that are there by name but are
 * not that device: a directory (what {@code docker run -v /dev/nvidia-uvm:/dev/nvidia-uvm} leaves on a host where the
 * node did not exist) and character nodes with another major than {@code /proc/devices} gives (a node made by hand
 * before the module got another major). CUDA cannot open either; the doctor must not call them present.
 */
@Tag("adversarial")
class DoctorUvmNodesAttackTest {
    @TempDir
    Path tmp;

    private Path proc() throws Exception {
        Path root = Files.createDirectories(tmp.resolve("proc"));
        Files.writeString(root.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia-frontend\n510 nvidia-uvm\n"
                + "\nBlock devices:\n  8 sd\n");
        return root;
    }

    @Test
    void directoriesNamedLikeTheUvmNodesAreNotCalledPresent() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        Files.createDirectory(dev.resolve("nvidia-uvm"));
        Files.createDirectory(dev.resolve("nvidia-uvm-tools"));
        DoctorReport.Uvm u = DoctorReport.Uvm.look(proc(), dev);
        assertThat(u.checked()).isTrue();
        assertThat(u.major()).isEqualTo(510);
        assertThat(u.problem()).as("/dev/nvidia-uvm and -tools are directories, not character devices: doctor says"
                + " [ok] 'present' while every CUDA program fails").isNotNull();
    }

    @Test
    void nodesWithAnotherMajorThanTheModulesAreNotCalledPresent() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "mknod needs root");
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        mknod(dev.resolve("nvidia-uvm"), 511, 0);
        mknod(dev.resolve("nvidia-uvm-tools"), 511, 1);
        DoctorReport.Uvm u = DoctorReport.Uvm.look(proc(), dev);
        assertThat(u.major()).isEqualTo(510);
        assertThat(u.problem()).as("/dev/nvidia-uvm is c 511:0 while nvidia-uvm's major is 510: doctor says [ok]")
                .isNotNull();
    }

    private static void mknod(Path p, int major, int minor) throws Exception {
        Process m = new ProcessBuilder("mknod", p.toString(), "c", String.valueOf(major), String.valueOf(minor))
                .redirectErrorStream(true).start();
        assertThat(m.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assumeTrue(m.exitValue() == 0, "mknod failed: " + new String(m.getInputStream().readAllBytes()));
    }
}
