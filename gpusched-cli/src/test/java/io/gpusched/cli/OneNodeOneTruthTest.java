package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The defect of issue 24: the {@code gpusched} command and a process embedding the library, both on their defaults
 * ({@code $GPUSCHED_STATE_DIR} here, no {@code --state-dir}), must share one ledger. The CLI runs as child processes
 * with only the environment variable; the library side is a {@link GpuNode} in this JVM whose directory comes from
 * the same {@link StateDirectory} rule with that base; the console serves the library's scheduler. The checker keeps
 * its own record of what each side was granted (from their answers, not from the scheduler) and checks that no GPU is
 * granted while the other side holds it; {@code status} and the console list every process's allocations.
 */
class OneNodeOneTruthTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path base;

    private record Cli(int exit, String out) {
    }

    private Cli cli(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--simulate", "dgx1-v100"));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put(StateDirectory.ENV, base.toString());
        pb.environment().remove("XDG_STATE_HOME");
        Process p = pb.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("gpusched " + String.join(" ", args) + " did not finish: " + out);
        }
        return new Cli(p.exitValue(), out);
    }

    private static JsonNode json(String out) throws Exception {
        return JSON.readTree(out.substring(out.indexOf('{')));
    }

    private static Set<Integer> devices(JsonNode alloc) {
        Set<Integer> s = new HashSet<>();
        alloc.get("devices").forEach(d -> s.add(d.asInt()));
        return s;
    }

    @Test
    void cliLibraryAndConsoleOnTheDefaultsShareOneLedger() throws Exception {
        Path dir = StateDirectory.forNode(Optional.empty(), "simulated:dgx1-v100", base);
        try (GpuNode lib = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            Allocation mine = lib.scheduler().allocate(GpuRequest.builder().count(4)
                    .holder(HolderProcess.current()).owner("embedder").build());
            Cli a = cli("--json", "allocate", "--gpu=4");
            assertThat(a.exit()).as(a.out()).isZero();
            JsonNode cliAlloc = json(a.out());
            Set<Integer> theirs = devices(cliAlloc);
            assertThat(theirs).as("the CLI is granted only GPUs the library does not hold").hasSize(4)
                    .doesNotContainAnyElementsOf(mine.deviceIndices());
            Cli more = cli("allocate", "--gpu=1");
            assertThat(more.exit()).as("all 8 held: " + more.out()).isNotZero();
            assertThat(more.out()).contains("INSUFFICIENT_GPUS");

            Cli status = cli("--json", "status");
            assertThat(status.exit()).isZero();
            List<String> listed = new ArrayList<>();
            json(status.out()).get("allocations").forEach(x -> listed.add(x.get("id").asText()));
            assertThat(listed).as("status lists every process's allocations")
                    .contains(mine.id(), cliAlloc.get("id").asText());

            try (ConsoleServer console = ConsoleServer.builder().scheduler(lib.scheduler()).inventory(lib.inventory())
                    .stateDir(dir).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                    .refresh(lib.scheduler()::refresh).build().start()) {
                HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                        URI.create(console.url() + "/api/v1/allocations")).build(),
                        HttpResponse.BodyHandlers.ofString());
                assertThat(r.statusCode()).isEqualTo(200);
                assertThat(r.body()).as("the console lists the CLI's allocation").contains(cliAlloc.get("id").asText());
            }

            String prefix = mine.id().substring(0, mine.id().lastIndexOf('-'));
            Cli typo = cli("release", prefix + "-0" + mine.id().substring(prefix.length() + 1));
            assertThat(typo.exit()).as("a typo is not a release: " + typo.out()).isNotZero();
            assertThat(typo.out()).contains("UNKNOWN_ALLOCATION");
            Cli rel = cli("release", mine.id());
            assertThat(rel.exit()).as(rel.out()).isZero();
            assertThat(rel.out()).contains("released " + mine.id());
            lib.scheduler().refresh();
            assertThat(lib.scheduler().allocation(mine.id())).as("the CLI released the library's allocation").isEmpty();
            assertThat(cli("release", cliAlloc.get("id").asText()).exit()).isZero();
        }
    }

    /** Random interleaving; the checker replays acknowledged grants and releases of both sides. */
    @Test
    void interleavedGrantsNeverOverlap() throws Exception {
        Path dir = StateDirectory.forNode(Optional.empty(), "simulated:dgx1-v100", base);
        Random rnd = new Random(7);
        Map<String, Set<Integer>> held = new HashMap<>(); // id -> GPUs, from each side's own answers
        try (GpuNode lib = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            for (int round = 0; round < 12; round++) {
                int n = 1 + rnd.nextInt(3);
                if (rnd.nextBoolean()) {
                    Optional<Allocation> a = lib.scheduler().tryAllocate(GpuRequest.builder().count(n).build());
                    a.ifPresent(x -> grant(held, x.id(), new HashSet<>(x.deviceIndices())));
                } else {
                    Cli c = cli("--json", "allocate", "--gpu=" + n);
                    if (c.exit() == 0) {
                        JsonNode j = json(c.out());
                        grant(held, j.get("id").asText(), devices(j));
                    } else {
                        assertThat(c.out()).contains("INSUFFICIENT_GPUS");
                        int busy = held.values().stream().mapToInt(Set::size).sum();
                        assertThat(busy + n).as("refused only when it does not fit: " + c.out()).isGreaterThan(8);
                    }
                }
                if (!held.isEmpty() && rnd.nextInt(3) == 0) {
                    String id = new ArrayList<>(held.keySet()).get(rnd.nextInt(held.size()));
                    boolean viaCli = rnd.nextBoolean();
                    if (viaCli) {
                        assertThat(cli("release", id).exit()).isZero();
                    } else {
                        assertThat(lib.scheduler().release(id)).isTrue();
                    }
                    held.remove(id);
                }
            }
        }
    }

    private static void grant(Map<String, Set<Integer>> held, String id, Set<Integer> gpus) {
        for (Map.Entry<String, Set<Integer>> e : held.entrySet()) {
            assertThat(gpus).as(id + " granted GPUs held by " + e.getKey()).doesNotContainAnyElementsOf(e.getValue());
        }
        held.put(id, gpus);
    }
}
