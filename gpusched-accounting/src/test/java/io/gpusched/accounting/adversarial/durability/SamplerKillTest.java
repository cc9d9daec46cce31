package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.host.GpuNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * kill -9 of the process that samples, mid-allocation (a real child JVM): what it had checkpointed survives, the time
 * from its last checkpoint until a sampler runs again is recorded as a gap that says so, and after the restart nothing
 * is counted twice. Checked by reading the store's files with a parser of this test's own (CRC-32C and JSON), not the
 * store's reader.
 */
@Tag("adversarial")
class SamplerKillTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(120)
    void aKilledSamplerLosesAtMostItsLastIntervalAndNothingCountsTwice() throws Exception {
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            Allocation a = node.scheduler().allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=alice"));
            Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-cp", System.getProperty("java.class.path"), "io.gpusched.accounting.SamplerChild",
                    dir.toString()).redirectErrorStream(true).redirectOutput(dir.resolve("child.log").toFile())
                    .start();
            try {
                // wait for three checkpoints of the allocation to be on disk
                while (intervals(a.id()).size() < 3) {
                    assertThat(child.isAlive()).as("child: %s", read(dir.resolve("child.log"))).isTrue();
                    Thread.sleep(50);
                }
            } finally {
                child.destroyForcibly(); // SIGKILL
                child.waitFor(30, TimeUnit.SECONDS);
            }
            List<JsonNode> before = intervals(a.id());
            long lastDurable = before.stream().mapToLong(x -> x.get("to").asLong()).max().orElseThrow();
            // a sampler again (this process), a few sweeps, then the release
            try (AccountingSampler s = AccountingSampler.open(AccountingStore.at(dir),
                    AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(1)), node.inventory(), null,
                    new HostIdleEffects(node.scheduler()), Clock.systemUTC()).orElseThrow()) {
                node.scheduler().addListener(s);
                for (int i = 0; i < 3; i++) {
                    s.sweep(node.inventory().sample(), node.scheduler().allocations());
                    Thread.sleep(100);
                }
                node.scheduler().release(a.id());
            }
            List<JsonNode> all = intervals(a.id());
            all.sort((x, y) -> Long.compare(x.get("from").asLong(), y.get("from").asLong()));
            assertThat(all.get(0).get("from").asLong()).isEqualTo(a.createdAt().toEpochMilli());
            assertThat(all.get(0).path("first").asBoolean()).isTrue();
            long held = 0;
            for (int i = 0; i < all.size(); i++) {
                JsonNode iv = all.get(i);
                if (i > 0) {
                    assertThat(iv.get("from").asLong()).as("interval %d starts where %d ended: no overlap, no hole",
                            i, i - 1).isEqualTo(all.get(i - 1).get("to").asLong());
                }
                for (JsonNode g : iv.get("gpus")) {
                    assertThat(g.get("held").asLong()).isLessThanOrEqualTo(iv.get("to").asLong()
                            - iv.get("from").asLong());
                    held += g.get("held").asLong();
                }
            }
            JsonNode last = all.get(all.size() - 1);
            assertThat(last.path("end").asText()).isEqualTo("RELEASED");
            long wall = last.get("to").asLong() - a.createdAt().toEpochMilli();
            assertThat(held).as("GPU-ms held, each interval once: 2 GPUs x grant to release").isEqualTo(2 * wall);
            // after the kill: the record resumes exactly at the last durable checkpoint, with a gap that says so
            JsonNode resumed = all.stream().filter(x -> x.get("from").asLong() == lastDurable).findFirst()
                    .orElseThrow(() -> new AssertionError("no interval starts at the last checkpoint " + lastDurable));
            assertThat(resumed.path("gap").asBoolean()).as("the time from the last checkpoint to the restart").isTrue();
            assertThat(resumed.get("gpus").get(0).get("notes").toString()).contains("not sampled");
            for (JsonNode g : resumed.get("gpus")) {
                assertThat(g.get("meas").asLong()).as("nothing measured in a gap").isZero();
            }
        }
    }

    /** Every interval record of one allocation in the store, read with this test's own parser. */
    private List<JsonNode> intervals(String id) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        Path acct = dir.resolve("accounting");
        if (!Files.isDirectory(acct)) {
            return out;
        }
        ObjectMapper m = new ObjectMapper();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(acct, "*.log")) {
            for (Path f : ds) {
                String text = Files.readString(f, StandardCharsets.UTF_8);
                int end = text.lastIndexOf('\n');
                for (String line : text.substring(0, end + 1).split("\n")) {
                    if (line.isEmpty()) {
                        continue;
                    }
                    String json = line.substring(9);
                    CRC32C c = new CRC32C();
                    byte[] b = json.getBytes(StandardCharsets.UTF_8);
                    c.update(b, 0, b.length);
                    assertThat(line.substring(0, 8)).isEqualTo(String.format("%08x", c.getValue()));
                    JsonNode n = m.readTree(json);
                    if ("i".equals(n.path("k").asText()) && id.equals(n.path("id").asText())) {
                        out.add(n);
                    }
                }
            }
        }
        return out;
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return e.toString();
        }
    }
}
