package io.gpusched.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every IDE example's main runs and prints what its README line promises. */
class ExamplesTest {

    static String run(ThrowingMain main) throws Exception {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            main.run();
        } finally {
            System.setOut(old);
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    interface ThrowingMain {
        void run() throws Exception;
    }

    @Test
    void examplesRun() throws Exception {
        assertThat(run(() -> Quickstart.main(new String[0]))).contains("got [GPU-");
        assertThat(run(() -> DiscoverNode.main(new String[0]))).contains("provider nvml");
        assertThat(run(() -> TopologyAwareAllocation.main(new String[0])))
                .contains("topology: 4 GPUs -> [4, 5, 6, 7], 9 NVLinks among them");
        assertThat(run(() -> SharedInference.main(new String[0]))).contains("MPS memory 0=6144M");
        assertThat(run(() -> CudaEnvironmentExample.main(new String[0]))).contains("\"variables\"");
        assertThat(run(() -> WorkflowPlan.main(new String[0]))).contains("stage 2 evaluate");
        assertThat(run(() -> CustomStrategy.main(new String[0]))).contains("high-first gives [7, 6]");
    }

    /**
     * With root and a cgroup hierarchy with device control (judged from the host, not from the isolator), the child
     * must really be fenced: of two device nodes made here for GPUs 0 and 1, it may open only GPU 1's (which then
     * fails in the driver with ENXIO, as no NVIDIA driver answers) and is refused GPU 0's; its output must come
     * through the example's standard output. Elsewhere the example must say why it cannot fence.
     */
    @Test
    void isolateJobFencesTheChildOrSaysWhyNot(@TempDir Path dir) throws Exception {
        boolean root = Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        boolean cgroups = Files.exists(Path.of("/sys/fs/cgroup/cgroup.controllers"))
                || Files.exists(Path.of("/sys/fs/cgroup/devices/devices.allow"));
        if (!root || !cgroups) {
            assertThat(run(() -> IsolateJob.main(new String[0]))).contains("isolation unavailable here: ");
            return;
        }
        Path gpu0 = dir.resolve("nvidia0");
        Path gpu1 = dir.resolve("nvidia1");
        for (int minor = 0; minor < 2; minor++) {
            Process mk = new ProcessBuilder("mknod", dir.resolve("nvidia" + minor).toString(), "c", "195",
                    String.valueOf(minor)).inheritIO().start();
            assertThat(mk.waitFor()).isZero();
        }
        String out = run(() -> IsolateJob.main(new String[]{gpu0.toString(), gpu1.toString()}));
        assertThat(out).contains("fenced ").contains("/dev/null opens")
                .contains(gpu0 + ": Operation not permitted")
                .contains(gpu1 + ": No such device or address")
                .contains("child exited with 0");
    }
}
