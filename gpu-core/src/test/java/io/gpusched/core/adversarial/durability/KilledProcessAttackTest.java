package io.gpusched.core.adversarial.durability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Three processes of 8 threads share one ledger, each under the {@code ackorder} shim; one is SIGKILLed while its
 * batches are in flight. The two others must finish every change, and the file, replayed by this test, must hold
 * every change any process acknowledged (the killed one's included), with contiguous sequences; each process's
 * acknowledgements came after a force of their records, and forces were shared (fewer than changes, not zero).
 */
@Tag("adversarial")
class KilledProcessAttackTest {

    @Test
    void sigkillMidBatchLosesNoAcknowledgedChangeAndOthersContinue(@TempDir Path work) throws Exception {
        Path so = AckOrderAttackTest.shim(work);
        Path dir = work.resolve("state");
        int procs = 3;
        List<Process> ps = new ArrayList<>();
        List<Path> outs = new ArrayList<>();
        List<Path> logs = new ArrayList<>();
        for (int i = 0; i < procs; i++) {
            Path out = work.resolve("out" + i);
            Path log = work.resolve("log" + i);
            outs.add(out);
            logs.add(log);
            ps.add(AckOrderAttackTest.child(so, log, dir, out, null, "8", i == 0 ? "100000" : "40", "3"));
        }
        // kill process 0 once it has acknowledged some changes (its threads are then mid-batch most of the time)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline && (!Files.exists(outs.get(0))
                || Files.readAllLines(outs.get(0), StandardCharsets.UTF_8).size() < 60)) {
            Thread.sleep(20);
        }
        assertTrue(ps.get(0).isAlive(), "process 0 ended before it could be killed");
        ps.get(0).destroyForcibly(); // SIGKILL
        ps.get(0).waitFor();
        for (int i = 1; i < procs; i++) {
            assertTrue(ps.get(i).waitFor(120, TimeUnit.SECONDS), "process " + i + " did not finish");
            List<String> o = Files.readAllLines(outs.get(i), StandardCharsets.UTF_8);
            assertEquals(0, ps.get(i).exitValue(), "process " + i + ": " + o);
            assertEquals(List.of(), o.stream().filter(l -> l.startsWith("FAIL")).toList(), "process " + i);
            assertTrue(o.contains("DONE"), "process " + i);
        }
        Path ledger = dir.resolve("ledger");
        LedgerReplay.Result r = LedgerReplay.replay(ledger);
        Map<String, long[]> ranges = AckOrderAttackTest.recordRanges(ledger);
        Set<String> heldBySurvivors = new HashSet<>();
        long changes = 0;
        long forces = 0;
        for (int i = 0; i < procs; i++) {
            for (String l : Files.readAllLines(outs.get(i), StandardCharsets.UTF_8)) {
                if (!l.startsWith("ACK ") || !l.endsWith(l.trim())) {
                    continue;
                }
                String key = l.substring(4).trim();
                if (key.split(" ").length != 2) {
                    continue; // a line torn by the kill
                }
                assertTrue(ranges.containsKey(key), "acknowledged by process " + i + " but not in the file: " + key);
                changes++;
                if (i > 0 && key.startsWith("A ")) {
                    heldBySurvivors.add(key.substring(2));
                } else if (i > 0) {
                    heldBySurvivors.remove(key.substring(2));
                }
            }
            forces += AckOrderAttackTest.checkAckAfterForce(logs.get(i), ledger);
        }
        assertTrue(r.live().containsAll(heldBySurvivors), "survivors' held allocations not live in the file");
        for (int i = 0; i < r.sequences().size(); i++) {
            assertEquals(r.sequences().get(0) + i, (long) r.sequences().get(i), "sequences with a gap or repeat");
        }
        assertTrue(forces > 0 && forces < changes, forces + " forces for " + changes + " acknowledged changes");
        System.out.printf("3 processes, one killed: %d acknowledged changes, %d forces%n", changes, forces);
    }
}
