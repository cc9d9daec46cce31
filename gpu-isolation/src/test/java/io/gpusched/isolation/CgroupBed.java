package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
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
import java.util.concurrent.TimeUnit;

/**
 * A test bed on real cgroups: fake GPU nodes made with mknod under a temp dir (no driver behind them: an open that
 * passes the device cgroup fails with ENXIO, one the cgroup refuses fails with EPERM), cgroups made and removed, and
 * an independent prober: a shell placed in the cgroup that opens every node for reading and for writing. The prober
 * never asks the isolator anything.
 */
final class CgroupBed implements AutoCloseable {
    /** What a node allows, as seen by opening it: "rw", "r", "w" or "-". */
    static final String RW = "rw";
    static final String NONE = "-";

    final Path dir;
    final Path dev;
    final Path proc;
    final SimulatedGpuInventory host;
    final GpuScheduler scheduler;
    final boolean amd;
    final List<String> nodes = new ArrayList<>();
    private final List<Path> cgroups = new ArrayList<>();
    private final List<Fence> fences = new ArrayList<>();

    static void assumeRoot() {
        Libc libc = Libc.Holder.get();
        assumeTrue(libc != null, () -> "skipped: " + Libc.Holder.failure());
        assumeTrue(libc.geteuid() == 0, "skipped: needs root to make device nodes and write cgroups");
    }

    /** NVIDIA: nvidia0..3 (195:0..3) and nvidiactl (195:255). AMD: renderD128..131, card0..3 (226), kfd (511:0). */
    CgroupBed(Path dir, boolean amd) throws Exception {
        assumeRoot();
        this.dir = dir;
        this.amd = amd;
        Libc libc = Libc.Holder.get();
        dev = Files.createDirectories(dir.resolve("dev"));
        if (amd) {
            Files.createDirectories(dev.resolve("dri"));
            for (int i = 0; i < 4; i++) {
                mknod(libc, "dri/renderD" + (128 + i), 226, 128 + i);
                mknod(libc, "dri/card" + i, 226, i);
            }
            mknod(libc, "kfd", 511, 0);
            proc = Fixtures.proc(dir, "226 drm\n511 kfd\n");
            SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("amd-bed");
            for (int i = 0; i < 4; i++) {
                b.device(GpuDevice.builder().index(i).uuid("0xa" + i).vendor(GpuVendor.AMD).name("AMD Instinct MI210")
                        .memory(MemorySize.ofGibibytes(64)).pciBusId("0000:0" + i + ":00.0").minor(128 + i).build());
            }
            host = b.build();
        } else {
            for (int i = 0; i < 4; i++) {
                mknod(libc, "nvidia" + i, 195, i);
            }
            mknod(libc, "nvidiactl", 195, 255);
            proc = Fixtures.proc(dir, "195 nvidia-frontend\n");
            host = Fixtures.nvidiaHost();
        }
        scheduler = Fixtures.scheduler(host);
    }

    private void mknod(Libc libc, String rel, int major, int minor) {
        libc.mknod(dev.resolve(rel).toString(), Libc.S_IFCHR | 0666, Libc.makedev(major, minor));
        nodes.add(rel);
    }

    /** Allocates exactly these GPUs, releasing earlier allocations that hold any of them. */
    Allocation gpus(Integer... indices) {
        for (Allocation a : scheduler.allocations()) {
            if (a.devices().stream().anyMatch(d -> List.of(indices).contains(d.index()))) {
                scheduler.release(a.id());
            }
        }
        return scheduler.allocate(GpuRequest.builder().deviceIndices(List.of(indices)).build());
    }

    CgroupDeviceIsolator.Builder builder(CgroupDeviceIsolator.Mechanism m) {
        return CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(dev).procRoot(proc).mechanism(m);
    }

    CgroupDeviceIsolator isolator(CgroupDeviceIsolator.Mechanism m) {
        return usable(builder(m).build(), m);
    }

    static CgroupDeviceIsolator usable(CgroupDeviceIsolator iso, CgroupDeviceIsolator.Mechanism m) {
        assumeTrue(iso.isAvailable(), () -> "skipped: " + iso.unavailabilityCause().orElse(""));
        Path root = m == CgroupDeviceIsolator.Mechanism.V1 ? iso.v1Root().orElse(null) : iso.v2Root().orElse(null);
        assumeTrue(root != null, "skipped: no " + m + " hierarchy mounted");
        if (m == CgroupDeviceIsolator.Mechanism.V2) {
            assumeTrue(v2DeviceProgramsWork(root), "skipped: cgroup2 is mounted but BPF_PROG_QUERY on it fails");
        }
        return iso;
    }

    static boolean v2DeviceProgramsWork(Path root) {
        Libc libc = Libc.Holder.get();
        try {
            int fd = libc.open(root.toString(), Libc.O_DIR_CLOEXEC);
            try {
                new Bpf(libc).query(fd);
                return true;
            } finally {
                libc.close(fd);
            }
        } catch (RuntimeException e) {
            return false;
        }
    }

    static Path root(CgroupDeviceIsolator iso, CgroupDeviceIsolator.Mechanism m) {
        return m == CgroupDeviceIsolator.Mechanism.V1 ? iso.v1Root().orElseThrow() : iso.v2Root().orElseThrow();
    }

    /** Makes a cgroup under {@code parent}; removed (children first) on close. */
    Path cgroup(Path parent) throws IOException {
        Path cg =
                Files.createDirectory(parent.resolve("gpusched-test-" + UUID.randomUUID().toString().substring(0, 8)));
        cgroups.add(cg);
        return cg;
    }

    Fence track(Fence f) {
        fences.add(f);
        return f;
    }

    /** Writes one line to a cgroup file, as a host or a runtime would. */
    static void write(Path cg, String file, String line) throws IOException {
        Files.writeString(cg.resolve(file), line);
    }

    static List<String> list(Path cg) throws IOException {
        return Files.readAllLines(cg.resolve("devices.list")).stream().map(String::trim).filter(s -> !s.isEmpty())
                .sorted().toList();
    }

    /**
     * Opens every node from a shell placed in {@code cgroup}, for reading and for writing.
     *
     * @return node (relative to dev) to "rw", "r", "w" or "-"
     */
    Map<String, String> probe(Path cgroup) throws Exception {
        String script = "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                + "for f in \"$@\"; do\n"
                + "  r=-; w=-\n"
                + "  e=$( (: < \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *) r=r;; esac\n"
                + "  e=$( (: >> \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *) w=w;; esac\n"
                + "  echo \"$f $r$w\"\n"
                + "done\n";
        List<String> cmd = new ArrayList<>(List.of("sh", "-c", script, cgroup.toString()));
        for (String n : nodes) {
            cmd.add(dev.resolve(n).toString());
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        Map<String, String> r = new LinkedHashMap<>();
        for (String line : out.strip().split("\n")) {
            String path = line.substring(0, line.lastIndexOf(' '));
            String acc = line.substring(line.lastIndexOf(' ') + 1).replace("--", NONE).replace("-", "");
            r.put(dev.relativize(Path.of(path)).toString(), acc.isEmpty() ? NONE : acc);
        }
        return r;
    }

    /** @return every node "-" except the given ones "rw" */
    Map<String, String> only(String... open) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String n : nodes) {
            m.put(n, NONE);
        }
        for (String o : open) {
            m.put(o, RW);
        }
        return m;
    }

    /** @return the GPU nodes of an NVIDIA bed that GPUs {@code idx} need, plus nvidiactl */
    static String[] nv(int... idx) {
        String[] out = new String[idx.length + 1];
        for (int i = 0; i < idx.length; i++) {
            out[i] = "nvidia" + idx[i];
        }
        out[idx.length] = "nvidiactl";
        return out;
    }

    @Override
    public void close() throws Exception {
        V1Fence.writer = V1Fence.KERNEL;
        V2Fence.programFilter = java.util.function.UnaryOperator.identity();
        V2Fence.fault = step -> false;
        for (Fence f : fences) {
            try {
                f.revoke();
            } catch (RuntimeException ignored) {
                // the cgroup may be gone already
            }
        }
        for (int i = cgroups.size() - 1; i >= 0; i--) {
            removeTree(cgroups.get(i));
        }
    }

    static void removeTree(Path cg) throws Exception {
        if (!Files.isDirectory(cg)) {
            return;
        }
        try (var s = Files.list(cg)) {
            for (Path c : s.filter(Files::isDirectory).toList()) {
                removeTree(c);
            }
        }
        for (int i = 0; i < 100 && Files.exists(cg); i++) {
            try {
                Files.delete(cg);
            } catch (IOException busy) {
                Thread.sleep(20);
            }
        }
    }
}
