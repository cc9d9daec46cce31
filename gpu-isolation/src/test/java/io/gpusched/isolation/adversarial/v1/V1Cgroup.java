package io.gpusched.isolation.adversarial.v1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Review-25 bed: fake NVIDIA nodes (nvidia0..3 = 195:0..3, nvidiactl = 195:255) made with mknod, cgroups made by hand
 * under the v1 devices hierarchy, and a prober (a shell placed in the cgroup) that opens each node for reading and for
 * writing. Nothing here asks the isolator what it did.
 */
final class V1Cgroup implements AutoCloseable {
    static final Path V1 = Path.of("/sys/fs/cgroup/devices");
    static final List<String> NODES = List.of("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl");

    final Path dir;
    final Path dev;
    final Path proc;
    final List<Path> cgroups = new ArrayList<>();

    V1Cgroup() throws Exception {
        assumeTrue(isRoot(), "needs root to make device nodes and write cgroup rules");
        assumeTrue(Files.isRegularFile(V1.resolve("devices.allow")), "needs the cgroup v1 devices hierarchy at " + V1);
        dir = Files.createTempDirectory("r25-");
        dev = Files.createDirectories(dir.resolve("dev"));
        proc = Files.createDirectories(dir.resolve("proc"));
        Files.writeString(proc.resolve("devices"),
                "Character devices:\n  1 mem\n195 nvidia-frontend\n\nBlock devices:\n"
                        + "  7 loop\n");
        for (int i = 0; i < 4; i++) {
            run("mknod", "-m", "0666", dev.resolve("nvidia" + i).toString(), "c", "195", String.valueOf(i));
        }
        run("mknod", "-m", "0666", dev.resolve("nvidiactl").toString(), "c", "195", "255");
    }

    static boolean isRoot() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("Uid:")) {
                    return l.split("\\s+")[2].equals("0");
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    static List<GpuDevice> devices() {
        List<GpuDevice> l = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            l.add(GpuDevice.builder().index(i).uuid("GPU-iso-" + i).vendor(GpuVendor.NVIDIA).name("NVIDIA A10")
                    .memory(MemorySize.ofGibibytes(24)).pciBusId("00000000:1" + i + ":00.0").minor(i).build());
        }
        return l;
    }

    static Allocation alloc(int... idx) {
        List<GpuDevice> d = new ArrayList<>();
        for (int i : idx) {
            d.add(devices().get(i));
        }
        return new Allocation("r25-" + UUID.randomUUID(), d, GpuRequest.builder().count(d.size()).build(),
                Instant.now());
    }

    CgroupDeviceIsolator isolator(Path state) {
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(devices()).devRoot(dev).procRoot(proc)
                .mechanism(CgroupDeviceIsolator.Mechanism.V1).stateDir(state).build();
        assumeTrue(iso.isAvailable() && iso.v1Root().isPresent(),
                () -> "v1 isolator unavailable: " + iso.unavailabilityCause().orElse(""));
        return iso;
    }

    Path cgroup(Path parent) throws IOException {
        Path p = Files.createDirectory(parent.resolve("r25-" + UUID.randomUUID().toString().substring(0, 8)));
        cgroups.add(p);
        return p;
    }

    static void write(Path cg, String file, String line) throws IOException {
        Files.writeString(cg.resolve(file), line);
    }

    static List<String> list(Path cg) throws IOException {
        return Files.readAllLines(cg.resolve("devices.list")).stream().map(String::trim).filter(s -> !s.isEmpty())
                .sorted().toList();
    }

    /** @return node -> "rw", "r", "w" or "-" as opened from a shell in {@code cg} */
    Map<String, String> probe(Path cg) throws Exception {
        String script = "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                + "for f in \"$@\"; do\n"
                + "  r=-; w=-\n"
                + "  e=$( (: < \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *'No such device'*) r=r;; *) echo \"BAD $f $e\"; exit 98;; esac\n"
                + "  e=$( (: >> \"$f\") 2>&1); case \"$e\" in *'not permitted'*) ;; *'No such device'*) w=w;; *) echo \"BAD $f $e\"; exit 98;; esac\n"
                + "  echo \"$f $r$w\"\n"
                + "done\n";
        List<String> cmd = new ArrayList<>(List.of("sh", "-c", script, cg.toString()));
        for (String n : NODES) {
            cmd.add(dev.resolve(n).toString());
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        Map<String, String> r = new LinkedHashMap<>();
        for (String line : out.strip().split("\n")) {
            String path = line.substring(0, line.lastIndexOf(' '));
            String acc = line.substring(line.lastIndexOf(' ') + 1).replace("-", "");
            r.put(dev.relativize(Path.of(path)).toString(), acc.isEmpty() ? "-" : acc);
        }
        return r;
    }

    /** @return every node "-" except nvidiactl and the given GPUs "rw" (a fence's view with no host deny) */
    static Map<String, String> only(int... gpus) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String n : NODES) {
            m.put(n, "-");
        }
        m.put("nvidiactl", "rw");
        for (int g : gpus) {
            m.put("nvidia" + g, "rw");
        }
        return m;
    }

    static String run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed: " + out);
        }
        return out;
    }

    /** @return a command line running the project's isolation child JVM with the test classpath */
    static List<String> child(String... args) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                "io.gpusched.isolation.IsolationChild"));
        cmd.addAll(List.of(args));
        return cmd;
    }

    static void rmCgroup(Path p) throws InterruptedException {
        if (!Files.isDirectory(p)) {
            return;
        }
        try (Stream<Path> s = Files.list(p)) {
            for (Path c : s.filter(Files::isDirectory).toList()) {
                rmCgroup(c);
            }
        } catch (IOException ignored) {
            // gone
        }
        for (int i = 0; i < 100 && Files.isDirectory(p); i++) {
            try {
                Files.delete(p);
            } catch (IOException busy) {
                Thread.sleep(20);
            }
        }
    }

    @Override
    public void close() throws Exception {
        for (int i = cgroups.size() - 1; i >= 0; i--) {
            rmCgroup(cgroups.get(i));
        }
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException ignored) {
            // a mount left behind is reported by the test that made it
        }
    }
}
