package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.isolation.internal.Bpf;
import io.gpusched.isolation.internal.Libc;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Real cgroups: fake GPU nodes made with mknod (no driver behind them), a child cgroup fenced for GPU 1, and a child
 * process inside it that opens each node. The allocated node opens with ENXIO, the other GPUs fail with EPERM,
 * /dev/null still opens. Needs root with a cgroup v1 devices hierarchy and/or cgroup2; skipped with the reason if not.
 */
@Tag("cgroup")
class CgroupIsolationTest {
    static final String ENXIO = "ENXIO";
    static final String EPERM = "EPERM";

    @TempDir
    Path dir;
    Path dev;
    Path proc;
    SimulatedGpuInventory host;
    GpuScheduler scheduler;
    Allocation gpu1;
    final List<Path> cgroups = new ArrayList<>();
    final List<Fence> fences = new ArrayList<>();

    @BeforeEach
    void setUp() throws Exception {
        Libc libc = Libc.Holder.get();
        assumeTrue(libc != null, () -> "skipped: " + Libc.Holder.failure());
        assumeTrue(libc.geteuid() == 0, "skipped: needs root to make device nodes and write cgroups");
        dev = Files.createDirectories(dir.resolve("dev"));
        for (int i = 0; i < 4; i++) {
            libc.mknod(dev.resolve("nvidia" + i).toString(), Libc.S_IFCHR | 0666, Libc.makedev(195, i));
        }
        libc.mknod(dev.resolve("nvidiactl").toString(), Libc.S_IFCHR | 0666, Libc.makedev(195, 255));
        proc = Fixtures.proc(dir, "195 nvidia-frontend\n");
        host = Fixtures.nvidiaHost();
        scheduler = Fixtures.scheduler(host);
        gpu1 = Fixtures.gpus(scheduler, 1);
    }

    @AfterEach
    void cleanUp() throws Exception {
        V1Fence.writer = V1Fence.KERNEL;
        V2Fence.programFilter = UnaryOperator.identity();
        for (Fence f : fences) {
            try {
                f.revoke();
            } catch (RuntimeException ignored) {
                // cgroup may be gone already
            }
        }
        for (Path cg : cgroups) {
            for (int i = 0; i < 50 && Files.exists(cg); i++) {
                try {
                    Files.delete(cg);
                } catch (IOException busy) {
                    Thread.sleep(20);
                }
            }
        }
    }

    CgroupDeviceIsolator isolator(CgroupDeviceIsolator.Mechanism m) {
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(dev)
                .procRoot(proc).mechanism(m).build();
        assumeTrue(iso.isAvailable(), () -> "skipped: " + iso.unavailabilityCause().get());
        Path root = m == CgroupDeviceIsolator.Mechanism.V1 ? iso.v1Root().orElse(null) : iso.v2Root().orElse(null);
        assumeTrue(root != null, "skipped: no " + m + " hierarchy mounted");
        return iso;
    }

    Path newCgroup(CgroupDeviceIsolator iso, CgroupDeviceIsolator.Mechanism m) throws IOException {
        Path root = m == CgroupDeviceIsolator.Mechanism.V1 ? iso.v1Root().get() : iso.v2Root().get();
        Path cg = Files.createDirectory(root.resolve("gpusched-test-" + UUID.randomUUID().toString().substring(0, 8)));
        cgroups.add(cg);
        return cg;
    }

    Fence fence(CgroupDeviceIsolator iso, Path cg, Allocation a) {
        Fence f = iso.fence(cg, a);
        fences.add(f);
        return f;
    }

    /** Starts a shell inside the cgroup that opens each node with dd; returns node name to OK/ENXIO/EPERM. */
    Map<String, String> probe(Path cgroup) throws Exception {
        List<String> nodes = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            nodes.add(dev.resolve("nvidia" + i).toString());
        }
        nodes.add(dev.resolve("nvidiactl").toString());
        nodes.add("/dev/null");
        String script = "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                + "for f in \"$@\"; do\n"
                + "  if err=$(dd if=\"$f\" of=/dev/null count=0 2>&1); then echo \"$f OK\"; else echo \"$f $err\"; fi\n"
                + "done\n";
        List<String> cmd = new ArrayList<>(List.of("sh", "-c", script, cgroup.toString()));
        cmd.addAll(nodes);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        Map<String, String> r = new LinkedHashMap<>();
        for (String line : out.strip().split("\n")) {
            String path = line.substring(0, line.indexOf(' '));
            String name = Path.of(path).getFileName().toString();
            r.put(name, line.endsWith(" OK") ? "OK" : line.contains("No such device or address") ? ENXIO
                    : line.contains("Operation not permitted") ? EPERM : line);
        }
        return r;
    }

    static Map<String, String> expectOnly(String allowedGpu) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i < 4; i++) {
            m.put("nvidia" + i, ("nvidia" + i).equals(allowedGpu) || allowedGpu == null ? ENXIO : EPERM);
        }
        m.put("nvidiactl", ENXIO);
        m.put("null", "OK");
        return m;
    }

    @ParameterizedTest
    @EnumSource(value = CgroupDeviceIsolator.Mechanism.class, names = {"V1", "V2"})
    void fenceAdmitsOnlyTheAllocatedGpuAndRevokeRestoresTheHostPolicy(CgroupDeviceIsolator.Mechanism m)
            throws Exception {
        CgroupDeviceIsolator iso = isolator(m);
        Path cg = newCgroup(iso, m);
        assertThat(probe(cg)).isEqualTo(expectOnly(null));
        Fence f = fence(iso, cg, gpu1);
        assertThat(f.mechanism()).isEqualTo(m.name().toLowerCase());
        assertThat(probe(cg)).isEqualTo(expectOnly("nvidia1"));
        assertThat(iso.fence(cg, gpu1)).as("idempotent: the same fence").isSameAs(f);
        Allocation gpu2 = Fixtures.gpus(scheduler, 2);
        f.update(gpu2);
        assertThat(probe(cg)).isEqualTo(expectOnly("nvidia2"));
        f.revoke();
        f.revoke();
        assertThat(probe(cg)).isEqualTo(expectOnly(null));
        assertThat(f.notes()).anySatisfy(n -> assertThat(n).contains("nvidia-uvm is not in"));
    }

    /**
     * 100 updates (alternating between two GPUs) leave one program of ours attached, and revoke none. A program left
     * behind by each update (or by every other one) would show as 100 (or 50) extra; each update also runs the host
     * policy check in a fresh child cgroup, ~20 ms, so 1,000 took 20 s for no more bite.
     */
    @Test
    void hundredUpdatesLeaveExactlyOneProgramOfOurs() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.V2);
        Path cg = newCgroup(iso, CgroupDeviceIsolator.Mechanism.V2);
        Allocation gpu2 = Fixtures.gpus(scheduler, 2);
        Fence f = fence(iso, cg, gpu1);
        for (int i = 0; i < 100; i++) {
            f.update(i % 2 == 0 ? gpu2 : gpu1);
        }
        assertThat(ourPrograms(cg)).isEqualTo(1);
        assertThat(probe(cg)).isEqualTo(expectOnly("nvidia1"));
        f.revoke();
        assertThat(ourPrograms(cg)).isZero();
    }

    static int ourPrograms(Path cg) {
        Libc libc = Libc.Holder.get();
        Bpf bpf = new Bpf(libc);
        int fd = libc.open(cg.toString(), Libc.O_DIR_CLOEXEC);
        try {
            int count = 0;
            for (int id : bpf.query(fd)) {
                int pfd = bpf.progFd(id);
                try {
                    if (CgroupDeviceIsolator.PROGRAM_NAME.equals(bpf.info(pfd)[1])) {
                        count++;
                    }
                } finally {
                    bpf.close(pfd);
                }
            }
            return count;
        } finally {
            bpf.close(fd);
        }
    }

    @Test
    void aProgramTheVerifierRejectsLeavesTheCgroupAsItWas() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.V2);
        Path cg = newCgroup(iso, CgroupDeviceIsolator.Mechanism.V2);
        V2Fence.programFilter = BpfDeviceProgram::corrupted;
        assertThatThrownBy(() -> iso.fence(cg, gpu1)).isInstanceOf(IsolationException.class)
                .hasMessageContaining("the kernel rejected the device program").hasMessageContaining("verifier log");
        assertThat(ourPrograms(cg)).isZero();
        assertThat(probe(cg)).isEqualTo(expectOnly(null));
        V2Fence.programFilter = UnaryOperator.identity();
        Fence f = fence(iso, cg, gpu1);
        V2Fence.programFilter = BpfDeviceProgram::corrupted;
        assertThatThrownBy(() -> f.update(Fixtures.gpus(scheduler, 3))).hasMessageContaining("rejected");
        assertThat(probe(cg)).as("the previous program stays in force").isEqualTo(expectOnly("nvidia1"));
        assertThat(f.allocation()).isEqualTo(gpu1);
        assertThat(ourPrograms(cg)).isEqualTo(1);
    }

    @Test
    void aV1WriteRefusedMidwayIsUndone() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.V1);
        Path cg = newCgroup(iso, CgroupDeviceIsolator.Mechanism.V1);
        AtomicInteger writes = new AtomicInteger();
        V1Fence.writer = (file, line) -> {
            if (writes.incrementAndGet() == 2) {
                throw new IOException("Invalid argument (injected)");
            }
            Files.writeString(file, line);
        };
        assertThatThrownBy(() -> iso.fence(cg, gpu1)).isInstanceOf(IsolationException.class)
                .hasMessageContaining("failed: Invalid argument (injected)")
                .hasMessageContaining("rules written were undone and the previous rules are in force");
        V1Fence.writer = V1Fence.KERNEL;
        assertThat(probe(cg)).isEqualTo(expectOnly(null));
    }

    @Test
    void aCgroupRemovedUnderUsIsHandled() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.V2);
        Path cg = newCgroup(iso, CgroupDeviceIsolator.Mechanism.V2);
        Fence f = fence(iso, cg, gpu1);
        Files.delete(cg);
        f.revoke();
        assertThat(f.isActive()).isFalse();
        assertThatThrownBy(() -> iso.fence(cg, gpu1)).isInstanceOf(IsolationException.class)
                .hasMessageContaining("no such cgroup");
    }

    @Test
    void pathsOutsideTheHierarchyAreRejectedBeforeAnyWrite() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.AUTO);
        Path root = iso.v2Root().or(iso::v1Root).orElseThrow();
        assertThatThrownBy(() -> iso.fence(Path.of("relative/cg"), gpu1)).hasMessageContaining("must be absolute");
        assertThatThrownBy(() -> iso.fence(root.resolve("a/../../etc"), gpu1)).hasMessageContaining("\"..\"");
        assertThatThrownBy(() -> iso.fence(dir, gpu1)).hasMessageContaining("is not inside");
        Path link = Files.createSymbolicLink(dir.resolve("sneaky"), root);
        assertThatThrownBy(() -> iso.fence(link, gpu1)).hasMessageContaining("is not inside");
        assertThatThrownBy(() -> iso.fence(root.resolve("cgroup.procs"), gpu1)).hasMessageContaining("not a cgroup");
        assertThatThrownBy(() -> iso.fence(root, gpu1)).hasMessageContaining("refusing to fence the root cgroup");
    }

    @Test
    void differentCgroupsFenceConcurrentlyAndOneCgroupGetsOneFence() throws Exception {
        CgroupDeviceIsolator iso = isolator(CgroupDeviceIsolator.Mechanism.V2);
        List<Path> cgs = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            cgs.add(newCgroup(iso, CgroupDeviceIsolator.Mechanism.V2));
        }
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<Fence>> futures = new ArrayList<>();
            for (Path cg : cgs) {
                futures.add(pool.submit(() -> iso.fence(cg, gpu1)));
                futures.add(pool.submit(() -> iso.fence(cg, gpu1)));
            }
            for (int i = 0; i < futures.size(); i += 2) {
                Fence a = futures.get(i).get(60, TimeUnit.SECONDS);
                Fence b = futures.get(i + 1).get(60, TimeUnit.SECONDS);
                fences.add(a);
                assertThat(a).isSameAs(b);
            }
        } finally {
            pool.shutdownNow();
        }
        for (Path cg : cgs) {
            assertThat(ourPrograms(cg)).isEqualTo(1);
            assertThat(probe(cg)).isEqualTo(expectOnly("nvidia1"));
        }
    }

    @Test
    void strictV2FenceIsAnAllowList() throws Exception {
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(dev)
                .procRoot(proc).mechanism(CgroupDeviceIsolator.Mechanism.V2)
                .strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW).build();
        assumeTrue(iso.isAvailable() && iso.v2Root().isPresent(), "skipped: no usable cgroup2");
        Path cg = newCgroup(iso, CgroupDeviceIsolator.Mechanism.V2);
        fence(iso, cg, gpu1);
        Libc.Holder.get().mknod(dev.resolve("other").toString(), Libc.S_IFCHR | 0666, Libc.makedev(1, 11));
        Map<String, String> r = probe(cg);
        assertThat(r).containsEntry("nvidia1", ENXIO).containsEntry("nvidia0", EPERM).containsEntry("null", "OK");
    }

    @Test
    void deviceNodesInAJobRoot() throws Exception {
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(dev)
                .procRoot(proc).build();
        Path jobRoot = dir.resolve("job");
        DeviceNodes.Created made = DeviceNodes.create(jobRoot, dev, iso.plan(gpu1), 0660);
        assertThat(made.made()).containsExactly(jobRoot.resolve("dev/nvidia1"), jobRoot.resolve("dev/nvidiactl"));
        assertThat(DeviceNodes.sameCharDevice(jobRoot.resolve("dev/nvidia1"),
                new DeviceNode(dev.resolve("nvidia1"), 195, 1, "gpu"))).isTrue();
        assertThat(DeviceNodes.create(jobRoot, dev, iso.plan(gpu1), 0660).made()).as("already there").isEmpty();
        made.remove();
        assertThat(jobRoot.resolve("dev/nvidia1")).doesNotExist();
        Files.createDirectories(jobRoot.resolve("dev"));
        Files.writeString(jobRoot.resolve("dev/nvidiactl"), "not a device");
        assertThatThrownBy(() -> DeviceNodes.create(jobRoot, dev, iso.plan(gpu1), 0660))
                .hasMessageContaining("refusing to replace");
        assertThat(jobRoot.resolve("dev/nvidia1")).as("what was made before is removed").doesNotExist();
    }
}
