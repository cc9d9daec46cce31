package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Several child JVMs ({@link LedgerChild}) share one state directory. What they were given is judged from their own
 * logs and from the ledger's history read by {@link LedgerHistory}, never by asking a scheduler.
 */
class MultiProcessLedgerTest {

    static Map<String, Long> memory() {
        Map<String, Long> m = new HashMap<>();
        GpuInventories.simulated("dgx-h100").devices().forEach(d -> m.put(d.uuid(), d.memory().bytes()));
        return m;
    }

    static Process child(Path dir, int seed, long ops, Path log, Path stop) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        // C1 only and the serial collector: four children share 2 cores, where G1's own threads cost them a fifth of
        // their CPU time (4 x 2500 operations: 29 s with G1, 23 s serial); what they do is the same
        List<String> cmd = new ArrayList<>(List.of(java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-Dgpusched.ledger.compactBytes=1000000000", "-cp", System.getProperty("java.class.path"),
                LedgerChild.class.getName(), dir.toString(), String.valueOf(seed), String.valueOf(ops),
                log.toString()));
        if (stop != null) {
            cmd.add(stop.toString());
        }
        return new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(log.resolveSibling(log.getFileName() + ".out").toFile()).start();
    }

    /** 4 child JVMs, 2500 operations each, on one ledger: the history shows no double allocation. */
    @Test
    @Timeout(value = 10, unit = TimeUnit.MINUTES)
    void fourProcessesNeverDoubleAllocate(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        List<Process> children = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            children.add(child(dir, i, 2500, tmp.resolve("c" + i + ".log"), null));
        }
        Set<String> acknowledged = new HashSet<>();
        Set<String> released = new HashSet<>();
        for (int i = 0; i < 4; i++) {
            int rc = children.get(i).waitFor();
            List<String> log = Files.readAllLines(tmp.resolve("c" + i + ".log"));
            assertThat(rc).as("child %d exit code; its log ends %s; its output: %s", i,
                    log.subList(Math.max(0, log.size() - 3), log.size()),
                    Files.readString(tmp.resolve("c" + i + ".log.out"))).isZero();
            assertThat(log).as("child %d finished its 2500 operations", i).contains("DONE 2500");
            assertThat(log).noneMatch(l -> l.startsWith("ERR"));
            for (String l : log) {
                String[] f = l.split(" ");
                if (f[0].equals("A")) {
                    assertThat(acknowledged.add(f[1])).as("id %s handed out twice", f[1]).isTrue();
                } else if (f[0].equals("R")) {
                    released.add(f[1]);
                }
            }
        }
        LedgerHistory h = LedgerHistory.check(dir.resolve("ledger"), memory());
        assertThat(h.violations).isEmpty();
        assertThat(h.allocatedEver).as("every acknowledged allocation is in the ledger").containsAll(acknowledged);
        assertThat(h.releasedEver).containsAll(released);
        assertThat(acknowledged).as("the children did real work").hasSizeGreaterThan(1000);
        assertThat(h.records).isGreaterThanOrEqualTo(acknowledged.size() + released.size());
    }

    /**
     * Children are killed with SIGKILL while they work. Acknowledged allocations survive; those bound to a dead
     * process are reclaimed (naming it); unbound ones stay until released.
     */
    @Test
    @Timeout(value = 10, unit = TimeUnit.MINUTES)
    void killedProcessesLoseNothingAcknowledgedAndTheirBoundAllocationsAreReclaimed(@TempDir Path tmp)
            throws Exception {
        Path dir = tmp.resolve("state");
        Path stop = tmp.resolve("stop");
        Random rnd = new Random(11);
        List<Process> children = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            children.add(child(dir, 100 + i, Long.MAX_VALUE, tmp.resolve("k" + i + ".log"), stop));
        }
        for (int i = 0; i < 4; i++) {
            Path log = tmp.resolve("k" + i + ".log");
            while (!Files.exists(log)
                    || Files.readAllLines(log).stream().filter(l -> l.startsWith("A ")).count() < 40) {
                assertThat(children.get(i).isAlive()).as("child %d runs: %s", i, Files.exists(log)
                        ? Files.readAllLines(log) : "no log").isTrue();
                Thread.sleep(20);
            }
        }
        Set<Integer> killed = new HashSet<>();
        while (killed.size() < 2) {
            killed.add(rnd.nextInt(4));
        }
        for (int i : killed) {
            children.get(i).destroyForcibly();
            assertThat(children.get(i).waitFor(60, TimeUnit.SECONDS)).isTrue();
            assertThat(children.get(i).exitValue()).as("child %d was killed by SIGKILL", i).isEqualTo(137);
        }
        Files.createFile(stop);
        Map<Long, Integer> pidOf = new HashMap<>();
        Map<String, Long> holderOf = new HashMap<>();
        Set<String> unboundLive = new HashSet<>();
        Set<String> boundAcked = new HashSet<>();
        Set<String> released = new HashSet<>();
        Set<String> inFlight = new HashSet<>();
        for (int i = 0; i < 4; i++) {
            Process p = children.get(i);
            assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
            List<String> log = Files.readAllLines(tmp.resolve("k" + i + ".log"));
            if (!killed.contains(i)) {
                assertThat(p.exitValue()).as("survivor %d exit code; output %s", i,
                        Files.readString(tmp.resolve("k" + i + ".log.out"))).isZero();
                assertThat(log.get(log.size() - 1)).startsWith("DONE");
            }
            assertThat(log).noneMatch(l -> l.startsWith("ERR"));
            long pid = Long.parseLong(log.get(0).split(" ")[1]);
            pidOf.put(pid, i);
            for (String l : log) {
                String[] f = l.split(" ");
                switch (f[0]) {
                    case "A" -> {
                        holderOf.put(f[1], pid);
                        (f[2].equals("B") ? boundAcked : unboundLive).add(f[1]);
                    }
                    case "r" -> inFlight.add(f[1]);
                    case "R" -> {
                        inFlight.remove(f[1]);
                        released.add(f[1]);
                        unboundLive.remove(f[1]);
                    }
                    default -> {}
                }
            }
        }
        unboundLive.removeAll(inFlight);
        // every child is gone now: a transaction reclaims their bound allocations
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(java.time.Duration.ZERO).build()) {
            s.refresh();
        }
        LedgerHistory h = LedgerHistory.check(dir.resolve("ledger"), memory());
        assertThat(h.violations).isEmpty();
        assertThat(h.live.keySet()).as("acknowledged, unbound, not released: still allocated")
                .containsAll(unboundLive);
        for (String id : boundAcked) {
            if (released.contains(id) || inFlight.contains(id)) {
                continue;
            }
            assertThat(h.live).as("bound %s of a gone process", id).doesNotContainKey(id);
            assertThat(h.reclaimedHolder).as("bound %s reclaimed naming its holder", id)
                    .containsEntry(id, holderOf.get(id));
        }
        assertThat(h.live.keySet()).as("nothing released came back").doesNotContainAnyElementsOf(released);
        assertThat(boundAcked).as("some bound allocations were live at the kill").isNotEmpty();
    }
}
