package io.gpusched.core.adversarial.durability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Durability seen from outside the JVM: {@link DurabilityChild} runs under an LD_PRELOAD shim of this package's own
 * ({@code durability-shim/ackorder.c}, compiled here with gcc), which logs in one order the ledger file's writes,
 * truncates and forces and every acknowledgement line the child prints. Judged from the log and the final file alone
 * (read by {@link LedgerReplay}): no acknowledgement before a successful force that followed the write of its record;
 * forces shared by concurrent changes; a force failing with EIO fails its changes and leaves the file as before.
 */
@Tag("adversarial")
class AckOrderAttackTest {

    static Path shim(Path work) throws IOException, InterruptedException {
        Path src = work.resolve("ackorder.c");
        try (InputStream in = AckOrderAttackTest.class.getResourceAsStream("/durability-shim/ackorder.c")) {
            assertTrue(in != null, "durability-shim/ackorder.c is missing from the test resources");
            Files.copy(in, src);
        }
        Path so = work.resolve("ackorder.so");
        Process p;
        try {
            p = new ProcessBuilder("gcc", "-shared", "-fPIC", "-o", so.toString(), src.toString(), "-ldl",
                    "-lpthread").redirectErrorStream(true).start();
        } catch (IOException e) {
            Assumptions.abort("gcc is needed to build the LD_PRELOAD shim and is not runnable: " + e.getMessage());
            throw e;
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), "gcc failed: " + out);
        return so;
    }

    /** Starts a child under the shim; its stdout goes to {@code out}. */
    static Process child(Path so, Path log, Path dir, Path out, String failForce, String... args) throws IOException {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"),
                DurabilityChild.class.getName(), dir.toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(
                ProcessBuilder.Redirect.appendTo(out.resolveSibling(out.getFileName() + ".err").toFile()));
        pb.environment().put("LD_PRELOAD", so.toString());
        pb.environment().put("ACKORDER_LOG", log.toString());
        if (failForce != null) {
            pb.environment().put("ACKORDER_FAIL_FORCE", failForce);
        }
        return pb.start();
    }

    /** Byte range [start, end) of each record line in the file, keyed "A id" / "R id". */
    static Map<String, long[]> recordRanges(Path ledger) throws IOException {
        byte[] b = Files.readAllBytes(ledger);
        Map<String, long[]> m = new HashMap<>();
        int start = 0;
        boolean header = true;
        for (int i = 0; i < b.length; i++) {
            if (b[i] != '\n') {
                continue;
            }
            String line = new String(b, start, i - start, StandardCharsets.UTF_8);
            if (!header) {
                java.util.regex.Matcher op = java.util.regex.Pattern.compile("\"op\"\\s*:\\s*\"([AR])\"").matcher(line);
                java.util.regex.Matcher id = java.util.regex.Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"")
                        .matcher(line);
                if (op.find() && id.find()) {
                    m.put(op.group(1) + " " + id.group(1), new long[]{start, i + 1});
                }
            }
            header = false;
            start = i + 1;
        }
        return m;
    }

    /**
     * Checks the log: each "O ACK x id" line comes after a successful force (F ... 0) that itself came after a
     * successful write covering the whole record of x id in the final file. Returns the number of successful forces.
     */
    static int checkAckAfterForce(Path log, Path ledger) throws IOException {
        Map<String, long[]> ranges = recordRanges(ledger);
        List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
        int lastForceOk = -1;
        int forces = 0;
        List<long[]> writes = new ArrayList<>(); // {logIndex, off, ret}
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i);
            if (l.startsWith("W ")) {
                String[] f = l.split(" ");
                writes.add(new long[]{i, Long.parseLong(f[2]), Long.parseLong(f[4])});
            } else if (l.startsWith("F ")) {
                if (l.endsWith(" 0")) {
                    lastForceOk = i;
                    forces++;
                }
            } else if (l.startsWith("O ACK ")) {
                String key = l.substring("O ACK ".length()).trim();
                long[] r = ranges.get(key);
                if (r == null) {
                    fail("acknowledged \"" + key + "\" has no record in the final ledger file");
                }
                int coveredAt = -1;
                for (long[] w : writes) {
                    if (w[2] > 0 && w[1] <= r[0] && w[1] + w[2] >= r[1]) {
                        coveredAt = (int) w[0];
                    }
                }
                if (coveredAt < 0) {
                    fail("acknowledged \"" + key + "\" (log line " + i + ") before any write of its record");
                }
                if (lastForceOk < coveredAt) {
                    fail("acknowledged \"" + key + "\" (log line " + i + ") with no successful force after the write"
                            + " of its record (log line " + coveredAt + ")");
                }
            }
        }
        return forces;
    }

    static List<String> lines(Path p) throws IOException {
        return Files.readAllLines(p, StandardCharsets.UTF_8);
    }

    @ParameterizedTest(name = "{0} threads")
    @ValueSource(ints = {1, 2, 8, 32})
    void noAcknowledgementBeforeItsForceAndConcurrentChangesShareForces(int threads, @TempDir Path work)
            throws Exception {
        Path so = shim(work);
        Path log = work.resolve("log");
        Path dir = work.resolve("state");
        Path out = work.resolve("out");
        int pairs = Math.max(4, 240 / threads);
        Process p = child(so, log, dir, out, null, String.valueOf(threads), String.valueOf(pairs));
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "child did not finish");
        List<String> o = lines(out);
        assertEquals(0, p.exitValue(), "child failed: " + o + Files.readString(work.resolve("out.err")));
        long acks = o.stream().filter(l -> l.startsWith("ACK ")).count();
        assertEquals(2L * threads * pairs, acks, "every change acknowledged: " + o.stream()
                .filter(l -> l.startsWith("FAIL")).limit(5).toList());
        int forces = checkAckAfterForce(log, dir.resolve("ledger"));
        assertTrue(forces > 0, "no force at all");
        if (threads == 1) {
            assertTrue(forces <= acks, forces + " forces for " + acks + " changes");
        } else {
            assertTrue(forces < acks, threads + " threads: " + forces + " forces for " + acks
                    + " changes: no force shared");
        }
        System.out.printf("%d threads: %d changes, %d forces%n", threads, acks, forces);
    }

    @ParameterizedTest(name = "{0} threads")
    @ValueSource(ints = {1, 8})
    void aForceFailingWithEioFailsItsChangesAndLeavesTheFileAsBefore(int threads, @TempDir Path work)
            throws Exception {
        Path so = shim(work);
        Path log = work.resolve("log");
        Path dir = work.resolve("state");
        Path out = work.resolve("out");
        // the 5th force fails (with one thread: the 5th change; with 8: a batch of one or more changes)
        Process p = child(so, log, dir, out, "5", String.valueOf(threads), "8", "2");
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "child did not finish");
        List<String> o = lines(out);
        assertEquals(0, p.exitValue(), "child failed: " + o);
        List<String> failed = o.stream().filter(l -> l.startsWith("FAIL")).toList();
        if (threads == 1) {
            assertEquals(1, failed.size(), "exactly the change of the failed force fails: " + o);
        } else {
            assertTrue(!failed.isEmpty(), "the changes of the failed force fail: " + o);
        }
        // the file, replayed independently, holds exactly the acknowledged changes
        LedgerReplay.Result r = LedgerReplay.replay(dir.resolve("ledger"));
        Set<String> expectLive = new TreeSet<>();
        int ackedChanges = 0;
        for (String l : o) {
            if (l.startsWith("ACK A ")) {
                expectLive.add(l.substring(6));
                ackedChanges++;
            } else if (l.startsWith("ACK R ")) {
                expectLive.remove(l.substring(6));
                ackedChanges++;
            }
        }
        assertEquals(expectLive, new TreeSet<>(r.live()), "file vs acknowledgements: " + o);
        assertEquals(ackedChanges, r.records(), "the file holds a record of the failed change: " + o);
        for (int i = 0; i < r.sequences().size(); i++) {
            assertEquals(r.sequences().get(0) + i, (long) r.sequences().get(i), "sequences with a gap");
        }
        // the scheduler's own view (LIVE) agrees with the file
        String live = o.stream().filter(l -> l.startsWith("LIVE")).findFirst().orElseThrow();
        Set<String> said = new TreeSet<>(live.length() > 5 ? List.of(live.substring(5).split(",")) : List.of());
        assertEquals(expectLive, said, "scheduler state vs acknowledgements");
        checkAckAfterForce(log, dir.resolve("ledger"));
    }
}
