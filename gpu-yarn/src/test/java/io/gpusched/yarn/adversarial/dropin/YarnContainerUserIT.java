package io.gpusched.yarn.adversarial.dropin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.yarn.GpuschedDevicePlugin;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * README's YARN default-runtime recipe with a container user who is not the NodeManager's. "A
 * default-runtime container gets no environment from YARN: the plugin records each container's GPUs in the node
 * ledger under its CONTAINER_ID, and the container reads them with gpusched env [...] the state directory must be
 * readable and writable by the containers' users." With the LinuxContainerExecutor, containers run as the
 * submitting user (secure mode) or as {@code nonsecure-mode.local-user} ({@code nobody} by default), never as the
 * NodeManager's user. The NodeManager's side is the plug-in in this JVM (root); the container's side is the drop-in
 * jar's documented entry point ({@code java -cp gpusched-yarn-<version>.jar:slf4j-api.jar
 * io.gpusched.yarn.YarnContainerGpus}) run as {@code nobody} through {@code setpriv}, with the state directory in each
 * of the modes a user could give it.
 */
@Tag("adversarial")
class YarnContainerUserIT {

    private static final String CONTAINER = "container_1700000000000_0001_01_000002";
    private Path base;

    @AfterEach
    void cleanUp() throws Exception {
        if (base != null) {
            try (Stream<Path> s = Files.walk(base)) {
                s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static boolean root() throws Exception {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().anyMatch(l -> l.matches("Uid:\\s+0\\s.*"));
    }

    private static Path setpriv() {
        for (String d : List.of("/usr/bin", "/bin", "/usr/sbin", "/sbin")) {
            if (Files.isExecutable(Path.of(d, "setpriv"))) {
                return Path.of(d, "setpriv");
            }
        }
        return null;
    }

    @Test
    // a defect an adversarial review found, fixed: the container reads the ledger read-only (NodeLedgerView)
    void aContainerRunningAsAnotherUserReadsItsGpus() throws Exception {
        Assumptions.assumeTrue(root(), "needs root: the container's side runs as the user nobody");
        Path setpriv = setpriv();
        Assumptions.assumeTrue(setpriv != null, "needs setpriv (util-linux) to run the container's side as nobody");
        Path jar;
        try (Stream<Path> s = Files.list(Path.of("target"))) {
            jar = s.filter(p -> p.getFileName().toString().matches("gpusched-yarn-.*\\.jar")).findFirst()
                    .orElseThrow(() -> new AssertionError("target/gpusched-yarn-<version>.jar is missing"));
        }
        Path slf4j = Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.matches(".*/slf4j-api-[0-9.]+\\.jar")).map(Path::of).findFirst().orElseThrow();
        // a directory the user nobody can reach (a JUnit @TempDir is 0700, root's /root and ~/.m2 are closed)
        base = Files.createTempDirectory(Path.of("/tmp"), "review24e-user");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.copy(jar, base.resolve(jar.getFileName()));
        Files.copy(slf4j, base.resolve(slf4j.getFileName()));
        for (Path p : List.of(base.resolve(jar.getFileName()), base.resolve(slf4j.getFileName()))) {
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rw-r--r--"));
        }
        Path state = Files.createDirectory(base.resolve("state"));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));

        // the NodeManager's side: the plug-in records the container's GPUs
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Configuration c = new Configuration(false);
            c.set(GpuschedDevicePlugin.KEY_STATE_DIR, state.toString());
            c.set(GpuschedDevicePlugin.KEY_HEALTH_INTERVAL_MS, "0");
            GpuschedDevicePlugin p = new GpuschedDevicePlugin(inv, c);
            Map<String, String> env = new HashMap<>();
            env.put("CONTAINER_ID", CONTAINER);
            assertEquals(2, p.allocateDevices(p.getDevices(), 2, env).size());
            p.close();
        }

        GroupPrincipal nogroup = state.getFileSystem().getUserPrincipalLookupService()
                .lookupPrincipalByGroupName(groupOfNobody());
        List<String> outcomes = new ArrayList<>();
        boolean served = false;
        for (String[] mode : new String[][]{{"rwx------", "rw-r--r--"}, {"rwxr-x---", "rw-r-----"},
            {"rwxr-xr-x", "rw-r--r--"}, {"rwxrwx---", "rw-rw----"}, {"rwxrwxrwx", "rw-rw-rw-"}}) {
            Files.getFileAttributeView(state, PosixFileAttributeView.class).setGroup(nogroup);
            Files.setPosixFilePermissions(state, PosixFilePermissions.fromString(mode[0]));
            try (Stream<Path> s = Files.list(state)) {
                for (Path f : s.toList()) {
                    if (Files.isRegularFile(f)) {
                        Files.getFileAttributeView(f, PosixFileAttributeView.class).setGroup(nogroup);
                        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString(mode[1]));
                    }
                }
            }
            ProcessBuilder pb = new ProcessBuilder(setpriv.toString(), "--reuid=nobody", "--regid=" + groupOfNobody(),
                    "--clear-groups", Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                    base.resolve(jar.getFileName()) + File.pathSeparator + base.resolve(slf4j.getFileName()),
                    "io.gpusched.yarn.YarnContainerGpus", "--inventory", "simulated:dgx1-v100", "--state-dir",
                    state.toString(), CONTAINER).directory(base.toFile());
            pb.environment().remove("CONTAINER_ID");
            Process proc = pb.redirectErrorStream(true).start();
            String out = new String(proc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(proc.waitFor(60, TimeUnit.SECONDS));
            boolean ok =
                    proc.exitValue() == 0 && out.lines().anyMatch(l -> l.startsWith("export CUDA_VISIBLE_DEVICES="));
            served |= ok;
            outcomes.add(mode[0] + "/" + mode[1] + ": exit " + proc.exitValue() + ", "
                    + out.lines().filter(l -> !l.startsWith("SLF4J")).findFirst().orElse(""));
        }
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
        assertTrue(served, "README: 'the state directory must be readable and writable by the containers' users';"
                + " no mode of it lets the container user nobody read its GPUs:\n" + String.join("\n", outcomes));
    }

    private static String groupOfNobody() throws Exception {
        for (String l : Files.readAllLines(Path.of("/etc/group"))) {
            String[] f = l.split(":");
            if (f.length > 2 && f[2].equals("65534")) {
                return f[0];
            }
        }
        return "nogroup";
    }
}
