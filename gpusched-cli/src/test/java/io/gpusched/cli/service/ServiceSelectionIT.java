package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.testing.LedgerReader;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Which ledger the command uses, as a user meets it: the packaged jar, run as root and as a real user made here with
 * {@code useradd} (through {@code setpriv}), with a node service on {@code $GPUSCHED_SOCKET} or none. Root and an
 * ordinary user are both served by the service when it answers; without it, root keeps the node's own ledger, an
 * ordinary user on a real node is refused in one line (the socket, how an admin starts the service, and
 * {@code --state-dir}), {@code --simulate} and {@code --state-dir} are a ledger of one's own on purpose; a socket path
 * that is not a socket, or one the user may not connect to, is an error rather than a fallback. Needs root, setpriv
 * and useradd.
 */
@Tag("adversarial")
@Timeout(300)
class ServiceSelectionIT {
    private Path base;
    private ServiceStandIn service;
    private final List<String> users = new ArrayList<>();
    private String user;
    private Path home;

    record Run(int exit, String out, String err) {
        List<String> errLines() {
            return err.strip().lines().filter(l -> !l.isBlank()).toList();
        }
    }

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(Files.readAllLines(Path.of("/proc/self/status")).stream().anyMatch(l -> l.matches(
                "Uid:\\s+0\\s.*")), "needs root (useradd, setpriv)");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")), "needs setpriv (util-linux)");
        assumeTrue(Files.isExecutable(Path.of("/usr/sbin/useradd")), "needs useradd (passwd)");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-select");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        user = "gsu-alice-" + UUID.randomUUID().toString().substring(0, 6);
        sh("/usr/sbin/useradd", "-m", "-s", "/bin/sh", "-U", user);
        users.add(user);
        home = Path.of(sh("getent", "passwd", user).split(":")[5]);
    }

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
        for (String u : users) {
            new ProcessBuilder("/usr/sbin/userdel", "-r", u).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    private void startService() throws Exception {
        service = new ServiceStandIn(base, "dgx1-v100");
        Files.setPosixFilePermissions(service.path(), PosixFilePermissions.fromString("rw-rw-rw-"));
    }

    private static String sh(String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor()).as(String.join(" ", cmd) + ": " + out).isZero();
        return out.strip();
    }

    /** Runs the jar as {@code asUser} (null: root) with a clean environment plus {@code env}. */
    private Run gpusched(String asUser, Map<String, String> env, String... args) throws Exception {
        Path jar = Path.of("target", "gpusched.jar").toAbsolutePath();
        assertThat(jar).as("built by package").isRegularFile();
        List<String> cmd = new ArrayList<>();
        if (asUser != null) {
            cmd.addAll(List.of("/usr/bin/setpriv", "--reuid=" + asUser, "--regid=" + asUser, "--init-groups"));
        }
        cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-jar", jar.toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(base.toFile());
        pb.environment().clear();
        pb.environment().put("PATH", "/usr/local/bin:/usr/bin:/bin");
        pb.environment().put("HOME", asUser == null ? base.resolve("root-home").toString() : home.toString());
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        byte[][] streams = new byte[2][];
        Thread t = new Thread(() -> {
            try {
                streams[1] = p.getErrorStream().readAllBytes();
            } catch (Exception e) {
                streams[1] = new byte[0];
            }
        });
        t.start();
        streams[0] = p.getInputStream().readAllBytes();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor();
            throw new AssertionError("gpusched " + String.join(" ", args) + " still ran after 120 s");
        }
        t.join();
        return new Run(p.exitValue(), new String(streams[0], StandardCharsets.UTF_8),
                new String(streams[1], StandardCharsets.UTF_8));
    }

    /** @return the socket, and for root a state directory of this test's (a user keeps the default rule) */
    private Map<String, String> socketEnv(Path socket) {
        return Map.of("GPUSCHED_SOCKET", socket.toString());
    }

    private Map<String, String> rootEnv(Path socket) {
        return Map.of("GPUSCHED_SOCKET", socket.toString(), "GPUSCHED_STATE_DIR", base.resolve("root-state")
                .toString());
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void withAServiceRootAndAnOrdinaryUserAreBothServedByIt() throws Exception {
        startService();
        Allocation bobs = service.allocate(GpuRequest.builder().count(2).owner("bob").build());
        Run asUser = gpusched(user, socketEnv(service.path()), "status");
        assertThat(asUser.exit()).as(asUser.err()).isZero();
        assertThat(asUser.out()).contains("simulated:dgx1-v100").contains(bobs.id());
        Run asRoot = gpusched(null, rootEnv(service.path()), "allocate", "--gpu=1");
        assertThat(asRoot.exit()).as(asRoot.err()).isZero();
        assertThat(LedgerReader.read(base.resolve("service-state")).live).hasSize(2);
        assertThat(base.resolve("root-state")).as("root's own ledger was not used").doesNotExist();
        // the user's --state-dir is a ledger of their own, on purpose, even with the service there
        Path mine = home.resolve("mine");
        Run own = gpusched(user, socketEnv(service.path()), "--simulate", "pcie-4xa10", "--state-dir",
                mine.toString(), "allocate", "--gpu=4");
        assertThat(own.exit()).as(own.err()).isZero();
        assertThat(LedgerReader.read(mine).live).hasSize(1);
        assertThat(LedgerReader.read(base.resolve("service-state")).live).hasSize(2);
        // a --simulate that is not the service's node is refused, naming both
        Run other = gpusched(user, socketEnv(service.path()), "--simulate", "pcie-4xa10", "allocate", "--gpu=1");
        assertThat(other.exit()).isEqualTo(2);
        assertThat(other.errLines()).singleElement().asString().contains("simulated:pcie-4xa10")
                .contains("simulated:dgx1-v100");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void withoutAServiceAnOrdinaryUserOnARealNodeIsRefusedInOneLine() throws Exception {
        Path socket = base.resolve("nothing-here.sock");
        Run r = gpusched(user, socketEnv(socket), "allocate", "--gpu=1");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.errLines()).singleElement().asString().startsWith("gpusched: ").contains(socket.toString())
                .contains("systemctl enable --now gpusched").contains("--state-dir DIR");
        assertThat(home.resolve(".local/state/gpusched")).as("no silent private ledger").doesNotExist();
        // the default socket is named when GPUSCHED_SOCKET is not set (this machine runs no service there)
        assumeTrue(!Files.exists(Path.of("/run/gpusched/gpusched.sock")), "a service runs on this machine");
        Run d = gpusched(user, Map.of(), "status");
        assertThat(d.errLines()).singleElement().asString().contains("/run/gpusched/gpusched.sock");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void withoutAServiceSimulateAndStateDirAreALedgerOfOnesOwnAndRootKeepsTheNodes() throws Exception {
        Path socket = base.resolve("nothing-here.sock");
        Run sim = gpusched(user, socketEnv(socket), "--simulate", "pcie-4xa10", "allocate", "--gpu=1");
        assertThat(sim.exit()).as(sim.err()).isZero();
        assertThat(home.resolve(".local/state/gpusched/simulated/pcie-4xa10/ledger")).isRegularFile();
        Run root = gpusched(null, rootEnv(socket), "--simulate", "pcie-4xa10", "allocate", "--gpu=1");
        assertThat(root.exit()).as(root.err()).isZero();
        assertThat(LedgerReader.read(base.resolve("root-state/simulated/pcie-4xa10")).live).hasSize(1);
        // root on a real node without a service: the node's own ledger (here: no GPU backend, so it says that)
        Run real = gpusched(null, rootEnv(socket), "status");
        assertThat(real.err()).doesNotContain("no node service answers").contains("no GPU backend");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void aStaleSocketIsNoServiceButAPathThatIsNotASocketOrNotPermittedIsAnError() throws Exception {
        Path stale = base.resolve("stale.sock");
        try (ServerSocketChannel s = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            s.bind(UnixDomainSocketAddress.of(stale)); // a service that is gone leaves its socket file behind
        }
        Files.setPosixFilePermissions(stale, PosixFilePermissions.fromString("rw-rw-rw-")); // as the service made it
        Run gone = gpusched(user, socketEnv(stale), "status");
        assertThat(gone.exit()).isEqualTo(2);
        assertThat(gone.errLines()).singleElement().asString().contains(stale.toString())
                .contains("connection refused").contains("--state-dir DIR");

        Path file = Files.writeString(base.resolve("file.sock"), "");
        for (String who : new String[]{user, null}) {
            Run r = gpusched(who, who == null ? rootEnv(file) : socketEnv(file), "status");
            assertThat(r.exit()).isEqualTo(2);
            assertThat(r.errLines()).singleElement().asString()
                    .startsWith("gpusched: NOT_A_SOCKET: " + file + " is a regular file");
        }

        startService();
        Files.setPosixFilePermissions(service.path(), PosixFilePermissions.fromString("rw-------"));
        Run denied = gpusched(user, socketEnv(service.path()), "status");
        assertThat(denied.exit()).isEqualTo(2);
        assertThat(denied.errLines()).singleElement().asString().startsWith("gpusched: NOT_PERMITTED: ")
                .contains(service.path().toString()).contains("socket group");
        Run root = gpusched(null, rootEnv(service.path()), "status");
        assertThat(root.exit()).as(root.err()).isZero();
        assertThat(root.out()).contains("simulated:dgx1-v100");
    }
}
