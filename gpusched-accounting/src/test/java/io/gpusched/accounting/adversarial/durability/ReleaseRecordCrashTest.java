package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.ReleaseRecordChild;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.host.GpuNode;
import io.gpusched.testing.FsyncShim;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * kill -9 of a process whose threads release allocations at once ({@link ReleaseRecordChild}, under the fsync shim of
 * gpusched-testing, each force slowed to 1 ms): judged from the shim's log and the journal's bytes alone, read with
 * this package's own parser. Every release acknowledged (its {@code onEvent} returned) had its record written and
 * covered by a force that began after the write; concurrent releases shared forces (group commit); after the kill,
 * and after a power loss that keeps only what was forced plus part of a line, every acknowledged record is there
 * exactly once, and the next sampler cuts the torn line and appends after it.
 */
@Tag("adversarial")
class ReleaseRecordCrashTest {
    private static final int THREADS = 8;
    private static final int ACKS_BEFORE_KILL = 240;

    @TempDir
    Path dir;

    @Test
    @Timeout(180)
    void acknowledgedReleasesAreForcedSharedAndSurviveAKillAndATornTail() throws Exception {
        Path so;
        try {
            so = FsyncShim.build(dir);
        } catch (IOException e) {
            assumeTrue(false, "skipped: gcc is not installed (.ci/install-test-deps installs it): " + e.getMessage());
            return;
        }
        Path state = dir.resolve("state");
        Instant base = LocalDate.now(ZoneOffset.UTC).atStartOfDay(ZoneOffset.UTC).toInstant().plus(Duration
                .ofHours(1));
        Path journal = state.resolve(AccountingStore.DIR).resolve(LocalDate.ofInstant(base, ZoneOffset.UTC) + ".log");
        Path log = dir.resolve("shim.log");
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), ReleaseRecordChild.class.getName(), state.toString(),
                String.valueOf(THREADS), "100000", String.valueOf(base.toEpochMilli())).redirectErrorStream(true)
                .redirectOutput(dir.resolve("child.out").toFile());
        pb.environment().putAll(FsyncShim.environment(so, log, journal, 1000));
        Process child = pb.start();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (acks(log) < ACKS_BEFORE_KILL) {
                assertThat(child.isAlive()).as("child: %s", read(dir.resolve("child.out"))).isTrue();
                assertThat(System.nanoTime()).as("%d acknowledgments within 2 min", ACKS_BEFORE_KILL)
                        .isLessThan(deadline);
                Thread.sleep(20);
            }
        } finally {
            child.destroyForcibly(); // SIGKILL, mid-stream: the threads are still releasing
            child.waitFor(30, TimeUnit.SECONDS);
        }

        Replay r = replay(Files.readAllBytes(log));
        assertThat(r.violations).as("acknowledged before forced (first 10 of %d)", r.violations.size())
                .isEmpty();
        assertThat(r.acked).hasSizeGreaterThanOrEqualTo(ACKS_BEFORE_KILL);
        // one force per release (the sampler before group commit) gives about as many forces as releases; shared
        // forces give fewer: 0.57 per release on an idle machine here, under 0.5 on a loaded one
        assertThat(r.forces).as("forces of the journal for %d acknowledged releases of %d threads: shared",
                r.acked.size(), THREADS).isPositive().isLessThanOrEqualTo(r.acked.size() * 3 / 4);

        // after the kill: the journal holds every acknowledged release exactly once (a torn write may end it)
        String afterKill = Files.readString(journal, StandardCharsets.UTF_8);
        assertExactlyOnce(JournalLines.parse(afterKill, true), r.acked, Set.of());

        // a power loss keeps what was forced and may keep part of what was not: cut the file inside the first line
        // that no force covered, or, when every line was forced, leave half a line behind
        byte[] bytes = Files.readAllBytes(journal);
        // the shim logs a write after it returned: a kill between the two leaves the file one write ahead of the log
        // (a CI-shaped run met it: 88,150 bytes against 85,728 logged), never behind
        assertThat((long) bytes.length).as("the file holds every byte the shim saw written").isGreaterThanOrEqualTo(
                r.written);
        int cut = (int) r.forced;
        int nextEnd = cut;
        while (nextEnd < bytes.length && bytes[nextEnd] != '\n') {
            nextEnd++;
        }
        try (FileChannel ch = FileChannel.open(journal, StandardOpenOption.WRITE)) {
            if (nextEnd < bytes.length && nextEnd - cut > 2) {
                ch.truncate(cut + (nextEnd - cut) / 2);
            } else {
                ch.truncate(cut);
                ch.position(cut);
                ch.write(ByteBuffer.wrap("0badc0de {\"k\":\"i\",\"id\":\"torn".getBytes(
                        StandardCharsets.US_ASCII)));
            }
        }
        String torn = Files.readString(journal, StandardCharsets.UTF_8);
        assertThat(torn).as("the simulated power loss left a torn line").doesNotEndWith("\n");
        assertExactlyOnce(JournalLines.parse(torn, true), r.acked, Set.of());

        // the next sampler: a release of its own goes after the cut tail; nothing acknowledged is lost or doubled
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             AccountingSampler s = AccountingSampler.open(AccountingStore.at(state), AccountingSettings
                     .defaults(), node.inventory(), null, new HostIdleEffects(node.scheduler()),
                     Clock.fixed(base,
                             ZoneOffset.UTC))
                     .orElseThrow()) {
            String uuid = node.inventory().devices().get(0).uuid();
            Instant at = base.plus(Duration.ofMinutes(30));
            s.onEvent(ReleaseRecordChild.event(AllocationEvent.Type.ALLOCATED, at, "after-restart", uuid));
            s.onEvent(ReleaseRecordChild.event(AllocationEvent.Type.RELEASED,
                    at.plusMillis(ReleaseRecordChild.HELD_MILLIS), "after-restart", uuid));
        }
        List<JsonNode> recs = JournalLines.parse(Files.readString(journal, StandardCharsets.UTF_8), false);
        assertExactlyOnce(recs, r.acked, Set.of("after-restart"));
    }

    /**
     * Every acknowledged id (and each of {@code more}) has exactly one interval, ended RELEASED, of one GPU held
     * {@link ReleaseRecordChild#HELD_MILLIS}; no id has two.
     */
    private static void assertExactlyOnce(List<JsonNode> recs, Set<String> acked, Set<String> more) {
        Map<String, Integer> seen = new HashMap<>();
        for (JsonNode n : recs) {
            if (!JournalLines.interval(n)) {
                continue;
            }
            String id = n.get("id").asText();
            seen.merge(id, 1, Integer::sum);
            assertThat(n.path("end").asText()).as("%s ended", id).isEqualTo("RELEASED");
            assertThat(n.get("to").asLong() - n.get("from").asLong()).isEqualTo(ReleaseRecordChild.HELD_MILLIS);
            assertThat(n.get("gpus")).hasSize(1);
            assertThat(n.get("gpus").get(0).get("held").asLong()).isEqualTo(ReleaseRecordChild.HELD_MILLIS);
        }
        List<String> twice = new ArrayList<>();
        seen.forEach((id, c) -> {
            if (c > 1) {
                twice.add(id);
            }
        });
        assertThat(twice).as("ids with more than one record").isEmpty();
        Set<String> want = new LinkedHashSet<>(acked);
        want.addAll(more);
        assertThat(seen.keySet()).as("acknowledged releases in the journal").containsAll(want);
    }

    /** What the shim's log says: acknowledged ids, the violations, forces, bytes written and forced. */
    private static final class Replay {
        final Set<String> acked = new LinkedHashSet<>();
        final List<String> violations = new ArrayList<>();
        int forces;
        long written;
        long forced;
    }

    /**
     * Replays the shim's log: the journal's bytes in write order (each record's end), the position up to which a
     * completed force covers them (what was written before it began), and each acknowledgment against its record.
     */
    private static Replay replay(byte[] logBytes) throws IOException {
        Replay r = new Replay();
        String text = new String(logBytes, StandardCharsets.UTF_8);
        StringBuilder partial = new StringBuilder();
        Map<String, Long> recordEnd = new HashMap<>();
        Map<String, Long> forceBegan = new HashMap<>();
        int nl = text.lastIndexOf('\n');
        for (String entry : text.substring(0, nl + 1).split("\n")) { // the kill may tear the log's last entry
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
                    assertThat((long) data.getBytes(StandardCharsets.UTF_8).length).as(head).isEqualTo(n);
                    long end = r.written - partial.toString().getBytes(StandardCharsets.UTF_8).length;
                    r.written += n;
                    partial.append(data);
                    int at;
                    while ((at = partial.indexOf("\n")) >= 0) {
                        String line = partial.substring(0, at);
                        end += line.getBytes(StandardCharsets.UTF_8).length + 1;
                        partial.delete(0, at + 1);
                        for (JsonNode node : JournalLines.parse(line + "\n", false)) {
                            if (JournalLines.interval(node)) {
                                recordEnd.putIfAbsent(node.get("id").asText(), end);
                            }
                        }
                    }
                }
                case "B" -> forceBegan.put(f[1] + "/" + f[2], r.written);
                case "E" -> {
                    Long began = forceBegan.remove(f[1] + "/" + f[2]);
                    assertThat(began).as("a force that ended without beginning: " + head).isNotNull();
                    if ("0".equals(f[4])) {
                        r.forces++;
                        r.forced = Math.max(r.forced, began);
                    }
                }
                case "O" -> {
                    for (String line : data.split("\n")) {
                        if (!line.startsWith("ACK ")) {
                            continue;
                        }
                        String id = line.substring(4);
                        r.acked.add(id);
                        Long end = recordEnd.get(id);
                        if (end == null) {
                            r.violations.add(line + ": acknowledged, but its record had not been written");
                        } else if (end > r.forced) {
                            r.violations.add(line + ": acknowledged with its record ending at byte " + end
                                    + ", but forces had covered only " + r.forced);
                        }
                    }
                }
                default -> throw new AssertionError("unknown shim log entry: " + head);
            }
        }
        return r;
    }

    private static int acks(Path log) throws IOException {
        if (!Files.exists(log)) {
            return 0;
        }
        String s = Files.readString(log, StandardCharsets.ISO_8859_1);
        int n = 0;
        for (int i = s.indexOf("ACK "); i >= 0; i = s.indexOf("ACK ", i + 4)) {
            n++;
        }
        return n;
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (IOException e) {
            return e.toString();
        }
    }
}
