package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code gpusched k8s-device-plugin} as a process: registers with a kubelet socket, stops cleanly on SIGTERM. */
class K8sDevicePluginCommandTest {
    @TempDir
    Path dir;

    @Test
    void registersAndStopsCleanlyOnSigterm() throws Exception {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable: "
                + UnixSockets.unavailabilityCause());
        BlockingQueue<RegisterRequest> registered = new LinkedBlockingQueue<>();
        ExecutorService ex = Executors.newCachedThreadPool();
        try (UnixSockets sockets = new UnixSockets("test-kubelet")) {
            Server kubelet =
                    sockets.serve(dir.resolve("kubelet.sock"), ex, new RegistrationGrpc.RegistrationImplBase() {
                        @Override
                        public void register(RegisterRequest r, StreamObserver<Empty> out) {
                            registered.add(r);
                            out.onNext(Empty.getDefaultInstance());
                            out.onCompleted();
                        }
                    });
            Process p = ChildCli.start(dir.resolve("state"), "k8s-device-plugin", "--inventory", "simulated:dgx-h100",
                    "--device-plugin-dir", dir.toString());
            java.io.ByteArrayOutputStream output = new java.io.ByteArrayOutputStream();
            Thread reader = new Thread(() -> {
                try {
                    p.getInputStream().transferTo(output);
                } catch (java.io.IOException e) {
                    // the process ended
                }
            });
            reader.start();
            try {
                RegisterRequest r = registered.poll(60, TimeUnit.SECONDS);
                assertThat(r).as("registration").isNotNull();
                assertThat(r.getResourceName()).isEqualTo("nvidia.com/gpu");
                assertThat(r.getVersion()).isEqualTo("v1beta1");
                assertThat(dir.resolve(r.getEndpoint())).exists();
                p.toHandle().destroy(); // SIGTERM (Process.destroy would also close our end of its output)
                assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
                reader.join(10_000);
                String out = output.toString(StandardCharsets.UTF_8);
                assertThat(out).contains("serving nvidia.com/gpu (8 devices)").contains("stopped");
                assertThat(dir.resolve(r.getEndpoint())).as("its socket is removed at stop").doesNotExist();
            } finally {
                p.destroyForcibly();
                kubelet.shutdownNow();
                ex.shutdownNow();
            }
        }
    }

    @Test
    void anUnavailableBackendIsSaidAndRetriedNotACrashLoop() throws Exception {
        assumeTrue(!java.nio.file.Files.exists(Path.of("/dev/nvidiactl")), "this host has an NVIDIA driver");
        Process p = ChildCli.start(dir.resolve("state"), "k8s-device-plugin", "--inventory", "nvml", "--retry", "200ms",
                "--device-plugin-dir", dir.toString());
        java.io.ByteArrayOutputStream output = new java.io.ByteArrayOutputStream();
        Thread reader = new Thread(() -> {
            try {
                p.getInputStream().transferTo(output);
            } catch (java.io.IOException e) {
                // the process ended
            }
        });
        reader.start();
        try {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            String marker = "no GPU backend is available, advertising nothing";
            while (output.toString(StandardCharsets.UTF_8).split(marker, -1).length < 3 && System.nanoTime() < until) {
                Thread.sleep(50);
            }
            // it said why at least twice (it tries again) and is still running, having registered nothing
            assertThat(output.toString(StandardCharsets.UTF_8).split(marker, -1).length).isGreaterThanOrEqualTo(3);
            assertThat(output.toString(StandardCharsets.UTF_8)).contains("nvml");
            assertThat(p.isAlive()).isTrue();
            p.destroy();
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        } finally {
            p.destroyForcibly();
        }
    }

    @Test
    void badSettingsAreRefusedNamingWhatIsValid() throws Exception {
        CliRunner cli = new CliRunner(dir.resolve("state"));
        CliRunner.Result r = cli.run("--simulate", "dgx1-v100", "k8s-device-plugin", "--replicas", "0",
                "--device-plugin-dir", dir.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("replicas 0").contains("1024");
        r = cli.run("--simulate", "dgx1-v100", "k8s-device-plugin", "--nvidia-resource", "gpu",
                "--device-plugin-dir", dir.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("\"gpu\"").contains("nvidia.com/gpu");
        r = cli.run("k8s-device-plugin", "--inventory", "simulated:", "--device-plugin-dir", dir.toString());
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("valid forms");
        r = cli.run("k8s-device-plugin", "--help");
        assertThat(r.exit()).isZero();
        assertThat(r.out()).contains("--replicas").contains("NO memory isolation").contains("--cdi");
    }
}
