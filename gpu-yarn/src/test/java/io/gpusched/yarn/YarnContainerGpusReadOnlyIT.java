package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.File;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The drop-in jar's {@link YarnContainerGpus} entry point as a default-runtime container runs it: as another user
 * ({@code nobody}, through {@code setpriv}) than the NodeManager's plug-in that wrote the ledger (root, this JVM). It
 * reads without the node's lock: it answers while a writer holds the lock, and a state directory it may not read is
 * one line naming the ledger and the modes that work, exit 4, no stack trace.
 */
class YarnContainerGpusReadOnlyIT {
    private static final String CONTAINER = "container_1700000000000_0001_01_000002";
    private Path base;

    @AfterEach
    void cleanUp() throws Exception {
        if (base != null) {
            try (Stream<Path> s = Files.walk(base)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private record Run(int exit, String out) {
    }

    @Test
    void aContainerUserReadsWhileTheLockIsHeldAndAClosedDirectoryIsOneLineExit4() throws Exception {
        Assumptions.assumeTrue(Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid")),
                "needs root: the container's side runs as the user nobody");
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")),
                "needs /usr/bin/setpriv (util-linux) to run the container's side as nobody");
        Path jar;
        try (Stream<Path> s = Files.list(Path.of("target"))) {
            jar = s.filter(p -> p.getFileName().toString().matches("gpusched-yarn-.*\\.jar")).findFirst()
                    .orElseThrow(() -> new AssertionError("target/gpusched-yarn-<version>.jar is missing"));
        }
        Path slf4j = Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.matches(".*/slf4j-api-[0-9.]+\\.jar")).map(Path::of).findFirst().orElseThrow();
        base = Files.createTempDirectory(Path.of("/tmp"), "yarn-readonly");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        for (Path p : List.of(jar, slf4j)) {
            Files.copy(p, base.resolve(p.getFileName()));
            Files.setPosixFilePermissions(base.resolve(p.getFileName()), PosixFilePermissions.fromString("rw-r--r--"));
        }
        String cp = base.resolve(jar.getFileName()) + File.pathSeparator + base.resolve(slf4j.getFileName());
        Path state = base.resolve("state"); // created by the plug-in: the modes a writer gives it are the recipe's

        Allocation a;
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Configuration c = new Configuration(false);
            c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
            c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, c);
            Map<String, String> env = new HashMap<>();
            env.put("CONTAINER_ID", CONTAINER);
            assertThat(p.allocateDevices(p.getDevices(), 2, env)).hasSize(2);
            p.close();
        }
        try (io.gpusched.core.host.GpuNode n = io.gpusched.core.host.GpuNode.builder().inventory("simulated:dgx1-v100")
                .stateDir(state).maintenanceInterval(java.time.Duration.ZERO).auditLogging(false).build()) {
            a = YarnContainerGpus.find(n.scheduler(), CONTAINER).orElseThrow();
        }
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(state))).isEqualTo("rwxr-xr-x");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(state.resolve("ledger"))))
                .isEqualTo("rw-r--r--");

        // a writer holds the node's lock (mid-transaction) while the container reads
        try (FileChannel lockFile = FileChannel.open(state.resolve("ledger.lock"), StandardOpenOption.WRITE);
             FileLock held = lockFile.lock()) {
            Run r = runAsNobody(cp, state);
            assertThat(r.exit()).as(r.out()).isZero();
            assertThat(r.out()).contains("export CUDA_VISIBLE_DEVICES='" + String.join(",", a.deviceUuids()) + "'");
            assertThat(held.isValid()).isTrue();
        }

        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        Run closed = runAsNobody(cp, state);
        assertThat(closed.exit()).as(closed.out()).isEqualTo(4);
        List<String> lines = closed.out().lines().filter(l -> !l.startsWith("SLF4J")).toList();
        assertThat(lines).as(closed.out()).singleElement().asString().startsWith("gpusched: UNREADABLE: ")
                .contains(state.resolve("ledger").toString()).contains("permission denied").contains("chmod 0755");
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwxr-xr-x"));
    }

    private static Run runAsNobody(String cp, Path state) throws Exception {
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp", cp,
                "io.gpusched.yarn.YarnContainerGpus", "--inventory", "simulated:dgx1-v100", "--state-dir",
                state.toString(), CONTAINER).directory(state.getParent().toFile()).redirectErrorStream(true);
        pb.environment().remove("CONTAINER_ID");
        Process proc = pb.start();
        boolean done = proc.waitFor(60, TimeUnit.SECONDS);
        if (!done) {
            proc.destroyForcibly().waitFor();
            throw new AssertionError("the container's side did not answer in 60 s (waiting for the node's lock?): "
                    + new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        }
        return new Run(proc.exitValue(), new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
    }
}
