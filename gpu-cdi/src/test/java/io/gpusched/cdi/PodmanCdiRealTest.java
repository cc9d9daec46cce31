package io.gpusched.cdi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
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
 * nodes are real character devices 195:N made with mknod. The uvm nodes (issue 32): a simulated node's spec gives the
 * container {@code /dev/nvidia-uvm} and {@code -tools} with the node's own major, though this host has none; a spec
 * written while the module was not loaded names them by path, and the container gets the host's node with the host's
 * numbers once it exists (the module loaded later), or podman refuses to start it, naming the node, while it does not:
 * never a container silently without uvm. The specs are written into /etc/cdi (podman 4.3 reads no other directory)
 * under test kinds, file names and an image tag unique to the run, and removed after. Needs root, podman, runc and
 * busybox-static.
 */
@Tag("root")
class PodmanCdiRealTest {
    static final String RUN = UUID.randomUUID().toString().substring(0, 8);
    static final String KIND = "gpusched-test.example/gpu-" + RUN;
    /** The host's spec, written while nvidia-uvm was not loaded, for a /dev that has the uvm nodes by now. */
    static final String KIND_LOADED = "gpusched-test.example/loaded-" + RUN;
    /** The same, for a /dev that still has no uvm node. */
    static final String KIND_ABSENT = "gpusched-test.example/absent-" + RUN;
    static final String IMAGE = "localhost/gpusched-cdi-test-" + RUN + ":busybox";
    static Path dir;
    static final List<Path> specs = new ArrayList<>();
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
        for (String app : List.of("sh", "ls", "cat", "env", "mknod", "echo", "stat")) {
            Files.createSymbolicLink(root.resolve(app), Path.of("busybox"));
        }
        Path tar = dir.resolve("rootfs.tar");
        assertThat(run(60, "tar", "-C", dir.resolve("rootfs").toString(), "-cf", tar.toString(), ".").exit())
                .isZero();
        Result imp = run(120, "/usr/bin/podman", "import", tar.toString(), IMAGE);
        assertThat(imp.exit()).as(imp.out()).isZero();
        inv = GpuInventories.simulated("dgx1-v100");
        write(CdiSpec.of(inv, CdiOptions.defaults().withNvidiaKind(KIND).withDevRoot(dev)).get(0), "sim");
        // a host whose nvidia-uvm was not loaded when the spec was written (its /proc/devices has no uvm major)
        Path proc = Files.createDirectories(dir.resolve("proc"));
        Files.writeString(proc.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia\n\nBlock devices:\n");
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("host");
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-" + RUN + "-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A10").memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:1" + i + ":00.0")
                    .minor(i).build());
        }
        SimulatedGpuInventory host = b.build();
        Path loaded = Files.createDirectories(dir.resolve("dev-loaded"));
        Path absent = Files.createDirectories(dir.resolve("dev-absent"));
        for (Path d : List.of(loaded, absent)) {
            for (int i = 0; i < 2; i++) {
                run(10, "/usr/bin/mknod", d.resolve("nvidia" + i).toString(), "c", "195", String.valueOf(i));
            }
            run(10, "/usr/bin/mknod", d.resolve("nvidiactl").toString(), "c", "195", "255");
        }
        write(CdiSpec.of(host, CdiOptions.defaults().withNvidiaKind(KIND_LOADED).withDevRoot(loaded)
                .withProcRoot(proc)).get(0), "loaded");
        write(CdiSpec.of(host, CdiOptions.defaults().withNvidiaKind(KIND_ABSENT).withDevRoot(absent)
                .withProcRoot(proc)).get(0), "absent");
        // ... then the module is loaded on the "loaded" host: its nodes appear (major 509 here), the spec unchanged
        run(10, "/usr/bin/mknod", loaded.resolve("nvidia-uvm").toString(), "c", "509", "0");
        run(10, "/usr/bin/mknod", loaded.resolve("nvidia-uvm-tools").toString(), "c", "509", "1");
    }

    /** Writes a spec into /etc/cdi under a name of this run (never over a real gpusched-nvidia.yaml). */
    static void write(CdiSpec s, String name) throws IOException {
        Path f = Path.of("/etc/cdi", "gpusched-test-" + RUN + "-" + name + ".yaml");
        Files.createDirectories(f.getParent());
        Files.writeString(f, s.toYaml());
        specs.add(f);
    }

    @AfterAll
    static void tearDown() throws Exception {
        for (Path f : specs) {
            Files.deleteIfExists(f);
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
            assertThat(nodes).as(r.out()).containsExactlyInAnyOrder("nvidia1", "nvidiactl", "nvidia-uvm",
                    "nvidia-uvm-tools");
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

    /** {@code stat -c '%n %t:%T'} lines (hex major:minor) as "name major:minor" in decimal. */
    static List<String> numbers(String out) {
        List<String> l = new ArrayList<>();
        for (String line : out.lines().toList()) {
            String[] f = line.trim().split(" ");
            if (f.length == 2 && f[0].startsWith("/dev/") && f[1].matches("[0-9a-f]+:[0-9a-f]+")) {
                String[] mm = f[1].split(":");
                l.add(f[0] + " " + Integer.parseInt(mm[0], 16) + ":" + Integer.parseInt(mm[1], 16));
            }
        }
        return l;
    }

    @Test
    void aSimulatedNodesUvmNodesHaveItsOwnNumbersThoughThisHostHasNone() throws Exception {
        Result r = podman(List.of("--device", KIND + "=0"),
                "stat -c '%n %t:%T' /dev/nvidia-uvm /dev/nvidia-uvm-tools; cat /dev/nvidia-uvm; echo end");
        assertThat(r.out()).as(r.out()).contains("end");
        assertThat(numbers(r.out())).containsExactly("/dev/nvidia-uvm 510:0", "/dev/nvidia-uvm-tools 510:1");
        // allowed by the runtime's device cgroup (no driver behind 510 here): ENXIO, never EPERM
        assertThat(r.out()).contains("can't open '/dev/nvidia-uvm': No such device or address");
    }

    @Test
    void aSpecWrittenBeforeTheModuleWasLoadedGivesTheHostsUvmNodesOnceTheyExist() throws Exception {
        assertThat(Files.readString(specs.get(1))).as("the spec names uvm by path only")
                .doesNotContain("major: 509").contains("path: /dev/nvidia-uvm\n");
        Result r = podman(List.of("--device", KIND_LOADED + "=1"),
                "stat -c '%n %t:%T' /dev/nvidia1 /dev/nvidia-uvm /dev/nvidia-uvm-tools; cat /dev/nvidia-uvm; echo end");
        assertThat(r.out()).as(r.out()).contains("end");
        assertThat(numbers(r.out())).containsExactly("/dev/nvidia1 195:1", "/dev/nvidia-uvm 509:0",
                "/dev/nvidia-uvm-tools 509:1");
        assertThat(r.out()).contains("can't open '/dev/nvidia-uvm': No such device or address");
    }

    @Test
    void aHostStillWithoutTheUvmNodesGetsTheRuntimesErrorNeverASilentContainer() throws Exception {
        Result r = podman(List.of("--device", KIND_ABSENT + "=0"), "echo ran");
        assertThat(r.exit()).as(r.out()).isNotZero();
        assertThat(r.out()).doesNotContain("ran").contains(dir.resolve("dev-absent/nvidia-uvm").toString());
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
            List<String> want = new ArrayList<>(List.of("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"));
            a.devices().forEach(d -> want.add("nvidia" + d.minor().getAsInt()));
            assertThat(nodes).as(r.out()).containsExactlyInAnyOrderElementsOf(want);
            assertThat(r.out()).contains("CUDA_VISIBLE_DEVICES=" + String.join(",", a.deviceUuids()));
        }
    }
}
