package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.testing.ChildOutput;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Child JVMs allocate, renew and release on one state directory and are killed with SIGKILL at random points; the
 * test keeps its own record of what each child saw acknowledged and checks a fresh scheduler against it: every
 * acknowledged detached allocation survives, every allocation bound to a killed child is reclaimed, nothing released
 * comes back, no id was issued twice, and the file stays a valid ledger (checked by the test's own parser).
 */
@Tag("adversarial")
class LedgerKillTest {

    @TempDir
    Path tmp;

    /** Every child started, killed after the test whatever happened to it (an assertion can end a round early). */
    private final List<Process> children = new ArrayList<>();

    @AfterEach
    void killChildren() {
        children.forEach(Process::destroyForcibly);
    }

    private static GpuScheduler open(Path dir) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    @Test
    void killedChildrenLoseNothingAcknowledgedAndTheirBoundAllocationsAreReclaimed() throws Exception {
        Path dir = tmp.resolve("state");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = System.getProperty("java.class.path");
        Random rnd = new Random(11);
        Set<String> everAcked = new HashSet<>();
        for (int round = 0; round < 3; round++) {
            int n = 4;
            List<Process> ps = new ArrayList<>();
            List<ChildOutput> logs = new ArrayList<>();
            List<Integer> targets = new ArrayList<>();
            for (int c = 0; c < n; c++) {
                // C1 only and the serial collector, as the other child-JVM tests: four children start at once on 2
                // cores; each is killed after a number of its lines, whatever the time that takes
                Process p = new ProcessBuilder(java, "-Dgpusched.ledger.compactBytes=3000", "-Xshare:auto",
                        "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
                        KillChild.class.getName(), dir.toString(),
                        Integer.toString(round * 10 + c), Boolean.toString(c % 2 == 0))
                        .redirectError(ProcessBuilder.Redirect.DISCARD).start();
                ps.add(p);
                children.add(p);
                logs.add(ChildOutput.of(p));
                targets.add(5 + rnd.nextInt(60));
            }
            // kill each child once it has printed its random number of lines (SIGKILL; what it printed before stays
            // readable, unlike after Process.destroyForcibly, which drops the lines not read yet)
            for (int c = 0; c < n; c++) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (logs.get(c).lines().size() < targets.get(c) && ps.get(c).isAlive()
                        && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertTrue(logs.get(c).lines().size() >= targets.get(c), "child " + c + " made progress: "
                        + logs.get(c).lines());
                logs.get(c).kill();
            }
            // the test's own view: detached allocations acknowledged and not being released must be live
            Set<String> mustLive = new HashSet<>();
            Set<String> mustNotLive = new HashSet<>();
            Set<String> maybe = new HashSet<>();
            for (int c = 0; c < n; c++) {
                Map<String, String> state = new HashMap<>();
                for (String line : logs.get(c).awaitEnd(Duration.ofSeconds(60))) {
                    String[] f = line.split(" ");
                    switch (f[0]) {
                        case "ACK" -> {
                            assertTrue(everAcked.add(f[1]), "id " + f[1] + " issued twice");
                            state.put(f[1], f[2]);
                        }
                        case "REL" -> state.put(f[1], "releasing");
                        case "DONE" -> state.put(f[1], "done");
                        default -> {}
                    }
                }
                for (Map.Entry<String, String> e : state.entrySet()) {
                    switch (e.getValue()) {
                        case "detached" -> mustLive.add(e.getKey());
                        case "releasing" -> maybe.add(e.getKey());
                        default -> mustNotLive.add(e.getKey()); // bound (holder killed) or released
                    }
                }
            }
            try (GpuScheduler checker = open(dir)) {
                checker.refresh();
                Set<String> live = new HashSet<>();
                for (Allocation a : checker.allocations()) {
                    live.add(a.id());
                }
                for (String id : mustLive) {
                    assertTrue(live.contains(id), "round " + round + ": acknowledged detached " + id + " lost; live "
                            + live);
                }
                for (String id : mustNotLive) {
                    assertTrue(!live.contains(id), "round " + round + ": " + id
                            + " (released, or bound to a killed child) is live");
                }
                // at most one unacknowledged detached allocation per detached child may have committed unseen
                Set<String> extra = new HashSet<>(live);
                extra.removeAll(mustLive);
                extra.removeAll(maybe);
                assertTrue(extra.size() <= n / 2, "round " + round + ": unexplained allocations " + extra);
                for (Allocation a : checker.allocations()) {
                    assertTrue(a.request().holder().isEmpty(), "a bound allocation of a dead child is live: " + a);
                }
                // clean up for the next round, releasing the dead children's ids from another process
                for (String id : live) {
                    assertTrue(checker.release(id));
                }
                assertEquals(List.of(), checker.allocations());
                // one more change, so that a torn tail a killed child left behind has been cut
                checker.release(checker.allocate(io.gpusched.core.GpuRequest.builder().count(4).exclusive().build())
                        .id());
            }
            LedgerAttacks.checkFile(dir.resolve("ledger"));
        }
        assertTrue(everAcked.size() > 10, "children acknowledged work: " + everAcked.size());
        String header = Files.readAllLines(dir.resolve("ledger")).get(0);
        assertTrue(Long.parseLong(header.split(" ")[3]) > 1, "children compacted while being killed: " + header);
        assertTrue(new File(dir.toFile(), "ledger").length() > 0);
    }
}
