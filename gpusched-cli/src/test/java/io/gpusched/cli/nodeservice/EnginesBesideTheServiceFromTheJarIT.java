package io.gpusched.cli.nodeservice;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Engines beside the node service, as README and docs/SERVICE.md ("Engines") set them up: a state directory
 * {@code root:<state group> 2770}, {@code gpusched serve} started from the jar as root with {@code state_group} and
 * {@code gpu.service.private_dir} in its configuration, an engine's user (a member of the group) writing the ledger
 * directly with {@code --state-dir}, and an ordinary user served through the socket. One ledger: the service lists the
 * engine's allocation and refuses what does not fit beside it, and the ledger file (read by {@link LedgerReader})
 * holds both. The service's own files are in the private directory, none in the shared one. Needs root, useradd,
 * setpriv and cgroup2 (skipped, saying so, without them).
 */
@Tag("cgroup")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class EnginesBesideTheServiceFromTheJarIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private Path base;
    private Path state;
    private Path own;
    private Path socket;
    private Path jobParent;
    private LocalUsers users;
    private JarService service;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        if (!Files.isRegularFile(v2.resolve("cgroup.procs"))) {
            v2 = Path.of("/sys/fs/cgroup");
        }
        assumeTrue(Files.isRegularFile(v2.resolve("cgroup.procs")) && Files.readString(Path.of("/proc/mounts"))
                .contains(" " + v2 + " cgroup2 "), "needs cgroup2");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-engines-it");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        state = base.resolve("state");
        own = base.resolve("own");
        socket = base.resolve("run").resolve("gpusched.sock");
        jobParent = v2.resolve("gsu-jobs-" + UUID.randomUUID().toString().substring(0, 8));
        users = LocalUsers.create();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
        if (users != null) {
            users.close();
        }
        if (jobParent != null) {
            Files.deleteIfExists(jobParent);
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    private static String java() {
        return JarService.java();
    }

    private static Path jar() {
        assertThat(JarService.jar()).as("built by package").isRegularFile();
        return JarService.jar();
    }

    private List<String> startService(Path config) throws Exception {
        service = JarService.start(jar(), List.of(), List.of("--simulate", "dgx1-v100", "--state-dir",
                state.toString(), "--config", config.toString(), "serve", "--listen", "127.0.0.1:0", "--socket",
                socket.toString()));
        return service.awaitServing();
    }

    /** Runs the jar as {@code u} with {@code env} (NAME=VALUE words) and the arguments. */
    private static LocalUsers.Result gpusched(User u, List<String> env, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("env", "HOME=/nonexistent"));
        cmd.addAll(env);
        cmd.addAll(List.of(java(), "-XX:TieredStopAtLevel=1", "-jar", jar().toString()));
        cmd.addAll(List.of(args));
        return LocalUsers.runAs(u, cmd, 120);
    }

    private Path sharedState(String group) throws Exception {
        Files.createDirectory(state);
        assertThat(LocalUsers.run(List.of("chgrp", group, state.toString()), 30).exit()).isZero();
        assertThat(LocalUsers.run(List.of("chmod", "2770", state.toString()), 30).exit()).isZero();
        return state;
    }

    private Path config(String group, boolean withPrivateDir) throws IOException {
        return Files.writeString(base.resolve("gpusched.yaml"), "gpu:\n  state_group: " + group + "\n  service:\n"
                + "    job_cgroup_parent: " + jobParent + "\n    kill_grace: 1s\n"
                + (withPrivateDir ? "    private_dir: " + own + "\n" : ""));
    }

    @Test
    void anEngineAndAUserShareOneLedgerWhileTheServiceKeepsItsFilesApart() throws Exception {
        String group = users.group("eng");
        User engine = users.user("engine", group);
        User alice = users.user("alice");
        sharedState(group);
        List<String> started = startService(config(group, true));
        assertThat(started).as("the service's start lines").anyMatch(l -> l.startsWith("gpusched node service on"))
                .anyMatch(l -> l.contains("changes need the token in " + own.resolve("console.token")));

        LocalUsers.Result e = gpusched(engine, List.of("GPUSCHED_STATE_GROUP=" + group), "--simulate", "dgx1-v100",
                "--state-dir", state.toString(), "allocate", "--gpu=6", "--json");
        assertThat(e.exit()).as("the engine's direct allocate: " + e.err()).isZero();
        String engineId = JSON.readTree(e.out()).path("id").asText();
        assertThat(engineId).isNotEmpty();

        List<String> viaSocket = List.of("GPUSCHED_SOCKET=" + socket);
        LocalUsers.Result a = gpusched(alice, viaSocket, "--simulate", "dgx1-v100", "allocate", "--gpu=2", "--json");
        assertThat(a.exit()).as("alice through the service: " + a.err()).isZero();
        String aliceId = JSON.readTree(a.out()).path("id").asText();
        LocalUsers.Result more = gpusched(alice, viaSocket, "--simulate", "dgx1-v100", "allocate", "--gpu=1");
        assertThat(more.exit()).as("a ninth GPU of eight, the engine holding six: " + more.out() + more.err())
                .isNotZero();
        assertThat(more.err()).contains("INSUFFICIENT_GPUS");

        LocalUsers.Result st = gpusched(alice, viaSocket, "--simulate", "dgx1-v100", "status", "--json");
        assertThat(st.exit()).as(st.err()).isZero();
        TreeSet<String> listed = new TreeSet<>();
        JsonNode all = JSON.readTree(st.out()).path("allocations");
        all.forEach(n -> listed.add(n.path("id").asText()));
        assertThat(listed).as("what the service lists").containsExactlyInAnyOrder(engineId, aliceId);

        LedgerReader ledger = LedgerReader.read(state);
        assertThat(ledger.live.keySet()).as("the ledger file").containsExactlyInAnyOrder(engineId, aliceId);
        assertThat(ledger.doubleGrants).isEmpty();

        try (Stream<Path> s = Files.list(state)) {
            assertThat(s.map(p -> p.getFileName().toString())).as("the shared directory " + state)
                    .doesNotContain("console.token", "jobs", "audit.log", "login-fences", "isolation", "accounting");
        }
        assertThat(own.resolve("console.token")).isRegularFile();
        assertThat(own.resolve("jobs").resolve("service.lock")).isRegularFile();
        assertThat(LocalUsers.runAs(engine, List.of("ls", own.toString()), 30).exit())
                .as("the engine's user lists the service's private directory").isNotZero();
    }

    @Test
    void withoutAPrivateDirectoryTheServiceRefusesASharedStateDirectoryNamingTheSetting() throws Exception {
        String group = users.group("eng");
        sharedState(group);
        List<String> said = startService(config(group, false));
        assertThat(service.process.waitFor(60, TimeUnit.SECONDS)).as("the refused service ends; it said " + said)
                .isTrue();
        assertThat(service.process.exitValue()).isNotZero();
        List<String> all = new ArrayList<>(said);
        service.out.drainTo(all);
        assertThat(String.join("\n", all)).contains("gpu.service.private_dir").contains(state.toString());
    }
}
