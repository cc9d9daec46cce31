package io.gpusched.cli.nodeservice;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 33's fair-queue promise as users meet it: the node service started from the jar as root, two real users
 * (useradd). Alice holds all 8 GPUs of the node and queues 20 more requests over the socket ({@code curl}); bob then
 * runs {@code gpusched allocate --gpu=1 --wait 5m} (the jar, as bob, the socket from {@code GPUSCHED_SOCKET}). Bob is
 * served by alice's second release at the latest (first come, first served would make him wait for twenty), and the
 * ledger's own file, read by {@link LedgerReader} (code that shares none of the service's), shows every GPU held by one
 * allocation at a time and who holds what. Needs root, useradd, setpriv and curl (skipped, saying so, without them).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class FairQueueFromTheJarIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private Path base;
    private Path state;
    private Path config;
    private Path socket;
    private Path jar;
    private LocalUsers users;
    private JarService service;
    private final List<Process> clients = new ArrayList<>();

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "needs curl");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-fair-it");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxr-xr-x"));
        state = base.resolve("state");
        config = base.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  users:\n    max_gpus: 0\n"); // no quota: the queue alone decides
        socket = base.resolve("run").resolve("gpusched.sock");
        // the jar and its lib/ copied where every user can read them, wherever this clone lives
        Path app = Files.createDirectories(base.resolve("app"));
        Path built = JarService.jar().getParent();
        assertThat(built.resolve("gpusched.jar")).as("built by package").isRegularFile();
        assertThat(new ProcessBuilder("cp", "-R", built.resolve("gpusched.jar").toString(), built.resolve("lib")
                .toString(), app.toString()).start().waitFor()).isZero();
        assertThat(new ProcessBuilder("chmod", "-R", "a+rX", app.toString()).start().waitFor()).isZero();
        jar = app.resolve("gpusched.jar");
        users = LocalUsers.create();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (Process c : clients) {
            c.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        if (service != null) {
            service.close();
        }
        if (users != null) {
            users.close();
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    @Test
    void aliceQueuesTwentyBobThenOneBobIsServedByTheSecondReleaseAtTheLatest() throws Exception {
        User alice = users.user("alice");
        User bob = users.user("bob");
        startService();

        List<String> hers = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            JsonNode a = JSON.readTree(curlOut(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"]}",
                    "http://localhost/api/v1/allocations"));
            assertThat(a.path("id").asText()).as("alice's allocation %d: %s", i, a).isNotEmpty();
            hers.add(a.path("id").asText());
        }
        assertThat(heldBy(alice)).as("alice holds the whole node").isEqualTo(8);

        for (int i = 0; i < 20; i++) {
            clients.add(curl(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"],\"wait\":\"5m\"}",
                    "http://localhost/api/v1/allocations"));
        }
        await(() -> queued() == 20, "alice's 20 waiting requests in the queue");

        ProcessBuilder pb = new ProcessBuilder("setpriv", "--reuid=" + bob.uid(), "--regid=" + bob.gid(),
                "--init-groups", "--", JarService.java(), "-XX:TieredStopAtLevel=1", "-jar", jar.toString(), "allocate",
                "--gpu=1", "--wait", "5m", "--json")
                .directory(base.toFile());
        pb.environment().clear();
        pb.environment().putAll(Map.of("PATH", "/usr/bin:/bin", "HOME", base.toString(), "GPUSCHED_SOCKET",
                socket.toString()));
        Process bobs = pb.start();
        clients.add(bobs);
        bobs.getOutputStream().close();
        await(() -> queued() == 21 || !bobs.isAlive(), "bob's request in the queue");
        assertThat(bobs.isAlive()).as("bob waits: the node is full").isTrue();

        int releases = 0;
        while (heldBy(bob) == 0 && releases < 2) {
            String id = hers.remove(0);
            JsonNode r = JSON.readTree(curlOut(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/" + id));
            assertThat(r.path("released").asBoolean()).as("alice's release of %s: %s", id, r).isTrue();
            releases++;
            // the freed GPU goes to someone waiting: alice's or bob's
            await(() -> LedgerReader.read(state).live.size() == 8, "the freed GPU granted again");
        }
        assertThat(bobs.waitFor(60, TimeUnit.SECONDS)).as("bob served by the second release at the latest")
                .isTrue();
        String out = new String(bobs.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(bobs.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(bobs.exitValue()).as("bob's gpusched allocate: %s %s", out, err).isZero();
        JsonNode his = JSON.readTree(out);
        assertThat(his.toString()).as("bob's allocation names him").contains(bob.name());

        LedgerReader ledger = LedgerReader.read(state);
        assertThat(ledger.doubleGrants).as("no GPU held by two allocations at once").isEmpty();
        assertThat(ledger.live).as("the node stays full: 8 allocations of one GPU").hasSize(8);
        assertThat(heldBy(bob)).as("bob holds one GPU, after %d of alice's releases", releases).isEqualTo(1);
        assertThat(heldBy(alice)).as("alice holds the other seven").isEqualTo(7);
        assertThat(queued()).as("alice's requests still waiting: 20 less those served").isEqualTo(20 - (releases - 1));
    }

    /** @return how many GPUs the ledger's file says {@code u} holds now (its records carry the owner's uid) */
    private int heldBy(User u) throws Exception {
        return LedgerReader.read(state).heldByOwner().getOrDefault("uid:" + u.uid(), 0);
    }

    private int queued() throws Exception {
        return JSON.readTree(curlOut(null, "http://localhost/api/v1/queue")).size();
    }

    private void startService() throws Exception {
        service = JarService.start(jar, List.of(), List.of("--simulate", "dgx1-v100", "--state-dir", state.toString(),
                "--config", config.toString(), "serve", "--listen", "127.0.0.1:0", "--socket", socket.toString()));
        List<String> said = service.awaitServing();
        assertThat(JarService.serving(said)).as("the service's start; it said %s", said).isTrue();
    }

    /** curl over the service's socket as {@code u} (null: root). */
    private Process curl(User u, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        if (u != null) {
            cmd.addAll(List.of("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(), "--init-groups", "--"));
        }
        cmd.addAll(List.of("curl", "-sS", "--unix-socket", socket.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    private String curlOut(User u, String... args) throws Exception {
        Process p = curl(u, args);
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return out;
    }

    private static void await(Check c, String what) throws Exception {
        for (int i = 0; i < 1200; i++) {
            if (c.ok()) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("not within 60 s: " + what);
    }

    /** A condition that may throw. */
    private interface Check {
        boolean ok() throws Exception;
    }
}
