package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The generated spec in a real podman (Debian's podman 4.3 with runc) on a busybox image made with
 * {@code podman import}: {@code --device <kind>=<name>} gives the container exactly that GPU's node and the control
 * nodes, and the spec's env; a container given GPU 1 cannot open GPU 0's node (the runtime's device cgroup, seen
 * from inside: EPERM, where an allowed node without a driver gives ENXIO); an unknown name fails with podman's error;
 * an allocation's {@link ContainerDevices#cdiArgs()} give a 2-GPU container both GPUs and their UUIDs. The fake GPU
 * nodes are real character devices 195:N made with mknod. The spec is written into /etc/cdi (podman 4.3 reads no
 * other directory) under a test kind, and removed after. Needs root, podman, runc and busybox-static.
 */
@Tag("root")
class PodmanCdiRealTest {
    static final String KIND = "gpusched-test.example/gpu";
    static final String IMAGE = "localhost/gpusched-cdi-test:busybox";
    static Path dir;
    static Path spec;
    static GpuInventory inv;

    @BeforeAll
    static void setUp() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root: mknod, /etc/cdi, rootful podman");
        for (String c : List.of("/usr/bin/podman", "/usr/sbin/runc", "/bin/busybox", "/usr/bin/mknod")) {
            assumeTrue(Files.isExecutable(Path.of(c)), c + " is not installed (Debian: podman, runc,"
                    + " busybox-static; .ci/install-test-deps)");
        }
        dir = Files.createTempDirectory(Path.of("/tmp"), "gpusched-cdi");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path dev = Files.createDirectories(dir.resolve("dev"));
        for (int i = 0; i < 8; i++) {
            run(10, "/usr/bin/mknod", dev.resolve("nvidia" + i).toString(), "c", "195", String.valueOf(i));
        }
        run(10, "/usr/bin/mknod", dev.resolve("nvidiactl").toString(), "c", "195", "255");
        Path root = Files.createDirectories(dir.resolve("rootfs/bin"));
        Files.copy(Path.of("/bin/busybox"), root.resolve("busybox"));
        for (String app : List.of("sh", "ls", "cat", "env", "mknod", "echo")) {
            Files.createSymbolicLink(root.resolve(app), Path.of("busybox"));
        }
        Path tar = dir.resolve("rootfs.tar");
        assertThat(run(60, "tar", "-C", dir.resolve("rootfs").toString(), "-cf", tar.toString(), ".").exit())
                .isZero();
        Result imp = run(120, "/usr/bin/podman", "import", tar.toString(), IMAGE);
        assertThat(imp.exit()).as(imp.out()).isZero();
        inv = GpuInventories.simulated("dgx1-v100");
        CdiSpec s = CdiSpec.of(inv, CdiOptions.defaults().withNvidiaKind(KIND).withDevRoot(dev)).get(0);
        spec = s.writeTo(Path.of("/etc/cdi"), "yaml");
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (spec != null) {
            Files.deleteIfExists(spec);
        }
        if (inv != null) {
            inv.close();
            run(60, "/usr/bin/podman", "rmi", "-f", IMAGE);
        }
    }

    record Result(int exit, String out) {
    }

    static Result run(int seconds, String... cmd) throws IOException, InterruptedException {
        File out = File.createTempFile("gpusched-podman", ".out");
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out).start();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                return new Result(124, "timed out: " + String.join(" ", cmd));
            }
            return new Result(p.exitValue(), Files.readString(out.toPath(), StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out.toPath());
        }
    }

    static Result podman(List<String> devices, String script) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/podman", "run", "--rm", "--runtime", "runc",
                "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--network", "none"));
        cmd.addAll(devices);
        cmd.addAll(List.of(IMAGE, "sh", "-c", script));
        return run(120, cmd.toArray(String[]::new));
    }

    @Test
    void aContainerSeesExactlyItsGpuAndTheControlNodes() throws Exception {
        GpuDevice one = inv.devices().get(1);
        for (String name : List.of("1", one.uuid())) {
            Result r = podman(List.of("--device", KIND + "=" + name),
                    "ls /dev; env; cat /dev/nvidia1; echo; mknod /dev/nvidia0 c 195 0; echo end");
            assertThat(r.out()).contains("end");
            List<String> nodes = r.out().lines().filter(l -> l.startsWith("nvidia")).toList();
            assertThat(nodes).as(r.out()).containsExactlyInAnyOrder("nvidia1", "nvidiactl");
            assertThat(r.out()).contains("CUDA_DEVICE_ORDER=PCI_BUS_ID");
            // allowed by the device cgroup, but no driver behind 195:1: ENXIO; 195:0 may not even be made: EPERM
            assertThat(r.out()).contains("can't open '/dev/nvidia1': No such device or address");
            assertThat(r.out()).contains("mknod: /dev/nvidia0: Operation not permitted");
        }
    }

    @Test
    void aContainerGivenGpu1CannotOpenGpu0sNode() throws Exception {
        // GPU 0's node put into the container by a bind mount: only the device cgroup stands between it and open()
        Result r = podman(List.of("--device", KIND + "=1", "-v", dir.resolve("dev/nvidia0") + ":/dev/nvidia0"),
                "cat /dev/nvidia0; cat /dev/nvidia1; echo end");
        assertThat(r.out()).contains("end")
                .contains("can't open '/dev/nvidia0': Operation not permitted")
                .contains("can't open '/dev/nvidia1': No such device or address");
    }

    @Test
    void anUnknownDeviceNameFailsWithPodmansError() throws Exception {
        Result r = podman(List.of("--device", KIND + "=9"), "echo ran");
        assertThat(r.exit()).isNotZero();
        assertThat(r.out()).contains("unresolvable CDI devices " + KIND + "=9").doesNotContain("ran");
    }

    @Test
    void anAllocationsCdiArgsGiveBothGpusAndTheirUuids() throws Exception {
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                .maintenanceInterval(java.time.Duration.ZERO).build()) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).build());
            ContainerDevices c = ContainerDevices.of(a, inv.devices(),
                    CdiOptions.defaults().withNvidiaKind(KIND).withDevRoot(dir.resolve("dev")));
            Result r = podman(c.cdiArgs(), "ls /dev; env");
            List<String> nodes = r.out().lines().filter(l -> l.startsWith("nvidia")).toList();
            List<String> want = new ArrayList<>(List.of("nvidiactl"));
            a.devices().forEach(d -> want.add("nvidia" + d.minor().getAsInt()));
            assertThat(nodes).as(r.out()).containsExactlyInAnyOrderElementsOf(want);
            assertThat(r.out()).contains("CUDA_VISIBLE_DEVICES=" + String.join(",", a.deviceUuids()));
        }
    }
}
