package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The device plug-in's image tar (built by {@code deploy/kubernetes/build-image.sh}, profile {@code k8s-image}) loads in
 * podman and the plug-in starts in it: {@code --help}, then a run on a simulated node that serves its socket into a
 * mounted device-plugin directory and stops on SIGTERM. Skipped, saying why, without the tar or a working podman.
 */
class K8sImageTest {
    static final Path TAR = Path.of("target/gpusched-image.tar");
    static final String IMAGE = "localhost/gpusched/gpusched:0.1.0-SNAPSHOT";
    /** What this sandbox needs (runc may not raise rlimits here); harmless elsewhere. */
    static final List<String> RUN =
            List.of("podman", "run", "--rm", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
                    "--ulimit", "nproc=1024:1024", "--network", "none");

    static String run(int seconds, List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        assertThat(p.waitFor(seconds, TimeUnit.SECONDS)).as(String.join(" ", cmd)).isTrue();
        return new String(out, StandardCharsets.UTF_8) + "\nexit " + p.exitValue();
    }

    @Test
    void theImageLoadsInPodmanAndThePluginStartsInIt() throws Exception {
        assumeTrue(Files.isRegularFile(TAR),
                "no " + TAR.toAbsolutePath() + ": build it with deploy/kubernetes/build-image.sh");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/podman")), "podman is not installed");
        String loaded = run(300, List.of("podman", "load", "-i", TAR.toString()));
        assumeTrue(loaded.contains("Loaded image"), "podman cannot load images here: " + loaded);
        List<String> help = new ArrayList<>(RUN);
        help.addAll(List.of(IMAGE, "k8s-device-plugin", "--help"));
        String h = run(120, help);
        assumeTrue(!h.contains("OCI runtime") && !h.contains("runc create failed"),
                "podman cannot run containers: " + h);
        assertThat(h).contains("--device-plugin-dir").contains("--replicas").endsWith("exit 0");

        Path dir = Files.createTempDirectory("gpusched-k8s-image");
        String name = "gpusched-k8s-image-test-" + ProcessHandle.current().pid();
        List<String> serve = new ArrayList<>(RUN);
        serve.addAll(List.of("-d", "--name", name, "-v", dir + ":/var/lib/kubelet/device-plugins", IMAGE,
                "k8s-device-plugin", "--inventory", "simulated:dgx1-v100"));
        try {
            run(120, serve);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            String logs = "";
            while (!logs.contains("serving nvidia.com/gpu") && System.nanoTime() < until) {
                Thread.sleep(200);
                logs = run(30, List.of("podman", "logs", name));
            }
            assertThat(logs).contains("serving nvidia.com/gpu (8 devices)");
            run(90, List.of("podman", "stop", "-t", "30", name));
        } finally {
            run(60, List.of("podman", "rm", "-f", "--ignore", name));
        }
    }
}
