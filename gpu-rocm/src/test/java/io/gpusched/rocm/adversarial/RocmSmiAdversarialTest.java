package io.gpusched.rocm.adversarial;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real librocm_smi behind the ROCm SMI provider, in child JVMs inside private mount namespaces (the library
 * reads {@code /sys/class/kfd} itself): hostile trees, a tree changed between the verdict and open, a probe that
 * hangs, concurrent callers. The child must exit 0 (never 134/139) and every cause must be one line.
 */
@Tag("adversarial")
class RocmSmiAdversarialTest {

    static final Path MI210 = KfdAdversarialTest.FIXTURES.resolve("topo-mi210-xgmi-pcie/nodes");

    @TempDir
    Path tmp;

    /** Environment assumptions, made by each test where the child is started (so a skip names its test). */
    static void needsRootNamespacesAndLibrary() throws Exception {
        assumeTrue(Files.exists(Paths.get("/usr/lib/librocm_smi64.so.1"))
                || Files.exists(Paths.get("/usr/lib/x86_64-linux-gnu/librocm_smi64.so.1")),
                "skipped: librocm_smi is not installed (Debian's librocm-smi64-1)");
        Process p = new ProcessBuilder("unshare", "-m", "sh", "-c", "mount -t tmpfs none /sys/class").start();
        assumeTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0,
                "skipped: no private mount namespaces (unshare -m and mount need root)");
    }

    record Result(int rc, String out) {
        List<String> causes() {
            List<String> c = new ArrayList<>();
            out.lines().filter(l -> l.startsWith("cause: ")).forEach(l -> c.add(l.substring(7)));
            return c;
        }
    }

    Result child(Path topology, List<String> jvmArgs, String... args) throws Exception {
        needsRootNamespacesAndLibrary();
        List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "sh", "-c",
                "mount -t tmpfs none /sys/class && mkdir -p /sys/class/kfd/kfd/topology /sys/class/drm"
                        + " && mount --bind \"$0\" /sys/class/kfd/kfd/topology && exec \"$@\"",
                topology.toString(), Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"));
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), AdvSmiChild.class.getName()));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "child did not end");
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
    }

    Path copyMi210() throws IOException {
        assertTrue(Files.isDirectory(MI210), "the captures copied into the module: " + MI210.toAbsolutePath());
        Path topo = tmp.resolve("topology");
        AdvTree.run("mkdir", "-p", topo.toString());
        AdvTree.run("cp", "-r", MI210.toString(), topo.resolve("nodes").toString());
        Files.writeString(topo.resolve("generation_id"), "1\n");
        Files.writeString(topo.resolve("system_properties"), "platform_oem 0\n");
        return topo;
    }

    static void assertOneLineCauses(Result r, int n) {
        assertEquals(0, r.rc(), "child died: " + r.out());
        assertTrue(r.out().lines().anyMatch("done"::equals), r.out());
        assertEquals(n, r.causes().size(), r.out());
        for (String c : r.causes()) {
            assertFalse(c.isBlank(), r.out());
        }
    }

    /** The verdict is taken on a good tree; then a node loses io_links/ before open(): open refuses, no abort. */
    @Test
    void treeChangedBetweenVerdictAndOpenNeverAbortsTheHost() throws Exception {
        Path topo = copyMi210();
        Result r = child(topo, List.of(), "change", "/sys/class/kfd/kfd/topology/nodes/5/io_links");
        assertOneLineCauses(r, 2);
        assertTrue(r.out().lines().anyMatch(l -> l.startsWith("typed: ")), r.out());
        assertFalse(r.causes().get(1).equals("<none>"), r.out());
    }

    /**
     * FIFOs where librocm_smi reads a gpu_id and a properties file (nobody writes them): neither the host checks nor
     * the probe (limited to 5 s here) may block the host; it answers with one line.
     */
    @Test
    void fifosInTheTreeNeitherHangNorAbortTheHost() throws Exception {
        Path topo = copyMi210();
        Path gpuId = topo.resolve("nodes/3/gpu_id");
        Files.deleteIfExists(gpuId);
        AdvTree.run("mkfifo", gpuId.toString());
        Path props = topo.resolve("nodes/4/properties");
        Files.delete(props);
        AdvTree.run("mkfifo", props.toString());
        Result r = child(topo, List.of("-Dgpusched.rocm-smi.probe.timeout-s=5"), "cause");
        assertOneLineCauses(r, 1);
        assertFalse(r.causes().get(0).equals("<none>"), r.out());
    }

    /** Four threads ask at once on a tree the library asserts on: one probe verdict, no abort, same cause. */
    @Test
    void concurrentCallersOnAnAbortingTreeNeverAbortTheHost() throws Exception {
        Path topo = copyMi210();
        AdvTree.run("rm", "-rf", topo.resolve("nodes/6/io_links").toString());
        Result r = child(topo, List.of(), "concurrent");
        assertOneLineCauses(r, 4);
        assertEquals(1, r.causes().stream().distinct().count(), r.out());
        assertFalse(r.causes().get(0).equals("<none>"), r.out());
    }
}
