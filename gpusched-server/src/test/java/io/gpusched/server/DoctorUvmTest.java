package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the doctor says of {@code nvidia-uvm} (issue 32), on fixture {@code /proc} and {@code /dev} trees: nothing
 * without an NVIDIA driver; with one, whether the module is loaded, what its absence means for CUDA and containers,
 * and how to load it; a loaded module whose nodes are missing.
 */
class DoctorUvmTest {
    @TempDir
    Path tmp;

    Path proc(String chars) throws Exception {
        Path p = Files.createDirectories(tmp.resolve("proc/driver/nvidia"));
        Files.writeString(p.resolve("version"), "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar"
                + " 5 22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n");
        Path root = tmp.resolve("proc");
        Files.writeString(root.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia-frontend\n" + chars
                + "\nBlock devices:\n  8 sd\n");
        return root;
    }

    @Test
    void withoutTheModuleTheDoctorSaysWhatItMeansAndHowToLoadIt() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        DoctorReport.Uvm u = DoctorReport.collect(List.of(), proc(""), dev).uvm();
        assertThat(u.checked()).isTrue();
        assertThat(u.major()).isNull();
        assertThat(u.missing()).containsExactly("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools");
        assertThat(u.problem()).contains("nvidia-uvm is not loaded").contains("CUDA program cannot initialise")
                .contains("container");
        assertThat(u.advice()).contains("nvidia-modprobe -u -c=0");
    }

    @Test
    void aLoadedModuleWithoutItsNodesAndOneWithThem() throws Exception {
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        Files.createFile(dev.resolve("nvidia-uvm"));
        DoctorReport.Uvm half = DoctorReport.Uvm.look(proc("510 nvidia-uvm\n"), dev);
        assertThat(half.major()).isEqualTo(510);
        assertThat(half.problem()).contains("loaded (major 510)").contains("/dev/nvidia-uvm-tools is missing");
        Files.createFile(dev.resolve("nvidia-uvm-tools"));
        DoctorReport.Uvm files = DoctorReport.Uvm.look(tmp.resolve("proc"), dev);
        assertThat(files.problem()).as("regular files named like the nodes open nothing")
                .contains("is not a character device");
        assumeTrue("root".equals(System.getProperty("user.name")), "mknod needs root");
        Files.delete(dev.resolve("nvidia-uvm"));
        Files.delete(dev.resolve("nvidia-uvm-tools"));
        mknod(dev.resolve("nvidia-uvm"), 510, 0);
        mknod(dev.resolve("nvidia-uvm-tools"), 510, 1);
        DoctorReport.Uvm ok = DoctorReport.Uvm.look(tmp.resolve("proc"), dev);
        assertThat(ok.problem()).isNull();
        assertThat(ok.advice()).isNull();
        assertThat(ok.missing()).isEmpty();
    }

    private static void mknod(Path p, int major, int minor) throws Exception {
        Process m = new ProcessBuilder("mknod", p.toString(), "c", String.valueOf(major), String.valueOf(minor))
                .redirectErrorStream(true).start();
        assertThat(m.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(m.exitValue()).as(new String(m.getInputStream().readAllBytes())).isZero();
    }

    @Test
    void withoutAnNvidiaDriverNothingIsSaid() throws Exception {
        Path proc = Files.createDirectories(tmp.resolve("bare"));
        Files.writeString(proc.resolve("devices"), "Character devices:\n226 drm\n237 kfd\n");
        DoctorReport.Uvm u = DoctorReport.Uvm.look(proc, tmp);
        assertThat(u.checked()).isFalse();
        assertThat(u.problem()).isNull();
    }
}
