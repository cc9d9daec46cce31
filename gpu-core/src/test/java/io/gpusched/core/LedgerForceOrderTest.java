package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Durability seen from outside the code under test: a child JVM runs a durable scheduler under an LD_PRELOAD shim
 * ({@code fsync-shim/fsync_shim.c} of gpusched-testing's resources, compiled here with gcc) that logs, in one order,
 * every write to the node ledger file, every {@code fsync}/{@code fdatasync} of it (before and after), and every line
 * the child prints when a change was returned to its caller. The checker below reads only that log: it does not ask the
 * scheduler anything, and the ledger's own force counter plays no part.
 *
 * <p>What must hold: a change is acknowledged only once the bytes of its record were written and a force of the file
 * that began after that write has returned 0; and concurrent changes share forces (group commit), counted as real
 * {@code fdatasync} calls.
 */
class LedgerForceOrderTest {

    /** One run of {@link ForcedAckChild} under the shim, judged from the shim's log alone. */
    record Verdict(int acks, int forces, int records, long bytesWritten, List<String> violations) {
    }

    @Test
    void noChangeIsAcknowledgedBeforeItsRecordIsForced(@TempDir Path tmp) throws Exception {
        Verdict v = run(tmp, 4, 40, 0);
        assertThat(v.violations()).as("acknowledged before forced (first 10)").isEmpty();
        assertThat(v.acks()).as("every change acknowledged (4 threads x 40 allocate+release)").isEqualTo(320);
        assertThat(v.records()).as("records written to the ledger").isGreaterThanOrEqualTo(320);
        assertThat(v.forces()).as("forces of the ledger file").isPositive();
    }

    /**
     * Group commit counted from outside: with each force of the ledger slowed to 1 ms by the shim (a slow disk),
     * changes of 8 threads that queue while a force runs must share the next one: at least three changes per force
     * on average (measured: 4.2-4.4). A ledger that forces each record, or each change, writes about as many forces as
     * changes; one that never forces writes none; one whose finished changes wait for the state lock the next batch
     * holds through its force (the group commit before 2432975) wrote 2.6-2.7 changes per force here.
     */
    @Test
    void concurrentChangesShareRealForces(@TempDir Path tmp) throws Exception {
        Verdict v = run(tmp, 8, 30, 1000);
        assertThat(v.violations()).as("acknowledged before forced (first 10)").isEmpty();
        assertThat(v.acks()).isEqualTo(480);
        assertThat(v.forces()).as("real fdatasync/fsync calls on the ledger for 480 changes").isPositive()
                .isLessThanOrEqualTo(v.acks() / 3);
    }

    // ------------------------------------------------------------------ running

    private static Path shim(Path dir) throws IOException, InterruptedException {
        Path src = dir.resolve("fsync_shim.c");
        try (InputStream in = LedgerForceOrderTest.class.getResourceAsStream("/fsync-shim/fsync_shim.c")) {
            assertThat(in).as("the shim's source on the test classpath").isNotNull();
            Files.copy(in, src);
        }
        Path so = dir.resolve("fsync_shim.so");
        Process gcc;
        try {
            gcc = new ProcessBuilder("gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", so.toString(), src.toString(),
                    "-ldl").redirectErrorStream(true).start();
        } catch (IOException e) {
            assumeTrue(false, "skipped: gcc is not installed (.ci/install-test-deps installs it): " + e.getMessage());
            throw e;
        }
        String out = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(gcc.waitFor()).as("gcc on the shim: " + out).isZero();
        return so;
    }

    private static Verdict run(Path tmp, int threads, int pairs, long forceDelayMicros) throws Exception {
        Path so = shim(tmp);
        Path state = tmp.resolve("state");
        Path log = tmp.resolve("shim.log");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                ForcedAckChild.class.getName(), state.toString(), String.valueOf(threads), String.valueOf(pairs))
                .redirectErrorStream(true).redirectOutput(tmp.resolve("child.out").toFile());
        pb.environment().put("LD_PRELOAD", so.toString());
        pb.environment().put("FSYNC_SHIM_LOG", log.toString());
        pb.environment().put("FSYNC_SHIM_FILE", state.toAbsolutePath().normalize().resolve(LedgerFile.FILE)
                .toString());
        pb.environment().put("FSYNC_SHIM_FORCE_DELAY_US", String.valueOf(forceDelayMicros));
        Process p = pb.start();
        boolean exited = p.waitFor(5, TimeUnit.MINUTES);
        if (!exited) {
            p.destroyForcibly();
        }
        String childOut = Files.readString(tmp.resolve("child.out"));
        assertThat(exited && p.exitValue() == 0).as("the child ran to its end: " + tail(childOut)).isTrue();
        assertThat(childOut).as("child output").contains("DONE");
        return check(Files.readAllBytes(log));
    }

    private static String tail(String s) {
        return s.length() > 2000 ? s.substring(s.length() - 2000) : s;
    }

    // ------------------------------------------------------------------ the checker

    /**
     * Replays the shim's log: the ledger's bytes in write order, the position up to which a completed force covers
     * them (what was written before the force began), and each acknowledgment against the end of its record.
     */
    static Verdict check(byte[] logBytes) throws IOException {
        ObjectMapper json = new ObjectMapper();
        String text = new String(logBytes, StandardCharsets.UTF_8);
        long written = 0;
        long forced = 0;
        int forces = 0;
        int acks = 0;
        StringBuilder partial = new StringBuilder();
        Map<String, Long> recordEnd = new HashMap<>();
        Map<String, Long> forceBegan = new HashMap<>();
        List<String> violations = new ArrayList<>();
        for (String entry : text.split("\n")) {
            if (entry.isEmpty()) {
                continue;
            }
            int sep = entry.indexOf('\u001f');
            String head = sep < 0 ? entry : entry.substring(0, sep);
            String data = sep < 0 ? "" : entry.substring(sep + 1).replace('\u001e', '\n');
            String[] f = head.split(" ");
            switch (f[0]) {
                case "W" -> {
                    long n = Long.parseLong(f[3]);
                    byte[] bytes = data.getBytes(StandardCharsets.UTF_8);
                    assertThat((long) bytes.length).as("bytes logged for " + head).isEqualTo(n);
                    written += n;
                    partial.append(data);
                    int nl;
                    long end = written - partial.toString().getBytes(StandardCharsets.UTF_8).length;
                    while ((nl = partial.indexOf("\n")) >= 0) {
                        String line = partial.substring(0, nl);
                        end += line.getBytes(StandardCharsets.UTF_8).length + 1;
                        partial.delete(0, nl + 1);
                        String[] r = line.split(" ", 3);
                        if (r.length == 3 && r[2].startsWith("{")) {
                            JsonNode node = json.readTree(r[2]);
                            recordEnd.put(node.path("op").asText() + " " + node.path("id").asText(), end);
                        }
                    }
                }
                case "B" -> forceBegan.put(f[1] + "/" + f[2], written);
                case "E" -> {
                    Long began = forceBegan.remove(f[1] + "/" + f[2]);
                    assertThat(began).as("a force that ended without beginning: " + head).isNotNull();
                    if ("0".equals(f[4])) {
                        forces++;
                        forced = Math.max(forced, began);
                    }
                }
                case "O" -> {
                    for (String line : data.split("\n")) {
                        if (!line.startsWith("ACK ")) {
                            continue;
                        }
                        acks++;
                        String key = line.substring(4);
                        Long end = recordEnd.get(key);
                        if (end == null) {
                            violations.add(line + ": acknowledged, but no record \"" + key + "\" had been written");
                        } else if (end > forced) {
                            violations.add(line + ": acknowledged with its record ending at byte " + end
                                    + " of the writes, but forces had covered only " + forced);
                        }
                    }
                }
                default -> throw new AssertionError("unknown shim log entry: " + head);
            }
        }
        List<String> shown = new ArrayList<>(violations.subList(0, Math.min(10, violations.size())));
        if (violations.size() > 10) {
            shown.add("... and " + (violations.size() - 10) + " more");
        }
        return new Verdict(acks, forces, recordEnd.size(), written, shown);
    }
}
