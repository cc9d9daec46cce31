package io.gpusched.core.adversarial.gather;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerStatistics;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Group commit with gathering under 1, 2, 8, 32 and 200 threads and under two processes, checked by {@link History}
 * (which parses the ledger file itself): no GPU granted exclusively twice while held, every acknowledged change in the
 * file, nothing else of this process's in it; and with 8 threads, fewer forces than changes.
 */
@Tag("adversarial")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class GatherHistoryAttackTest {

    /** Runs {@code threads} threads of {@code cycles} allocate/release cycles, all released at the same instant. */
    static List<String> run(GpuScheduler s, int threads, int cycles) throws InterruptedException {
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    go.await();
                    for (int i = 0; i < cycles; i++) {
                        Work.cycle(s, acks);
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            th.start();
            ts.add(th);
        }
        go.countDown();
        for (Thread th : ts) {
            th.join();
        }
        assertEquals(List.of(), errors, "errors in the committing threads");
        return acks;
    }

    @ParameterizedTest(name = "{0} threads")
    @ValueSource(ints = {1, 2, 8, 32, 200})
    void everyAcknowledgedChangeIsInTheFileAndNoGpuIsGrantedTwice(int threads, @TempDir Path dir) throws Exception {
        int cycles = threads >= 200 ? 3 : threads >= 32 ? 10 : 40;
        List<String> acks;
        LedgerStatistics stats;
        try (GpuScheduler s = Work.scheduler(dir)) {
            acks = run(s, threads, cycles);
            stats = s.ledgerStatistics().orElseThrow();
            assertEquals(List.of(), s.allocations(), "every allocation was released");
        }
        History h = History.check(dir.resolve("ledger"));
        h.acknowledged(acks);
        assertEquals(List.of(), h.violations, "ledger history");
        assertEquals(acks.size(), h.records, "records in the file vs acknowledged changes (one process)");
        assertTrue(acks.size() > 0, "no change was acknowledged");
        System.out.printf("gather %d threads: %d changes, %d records, %d forces%n", threads, acks.size(),
                stats.records(), stats.forces());
    }

    /**
     * Eight threads share forces: the ledger's own counter shows fewer forces than changes. The number of forces is a
     * count, not a time; with no sharing at all it would equal the number of changes.
     */
    @Test
    void eightThreadsShareForces(@TempDir Path dir) throws Exception {
        try (GpuScheduler s = Work.scheduler(dir)) {
            List<String> acks = run(s, 8, 50);
            LedgerStatistics st = s.ledgerStatistics().orElseThrow();
            assertEquals(acks.size(), st.records(), "records written vs acknowledged changes");
            assertTrue(st.forces() < acks.size(),
                    "8 threads forced " + st.forces() + " times for " + acks.size() + " changes: no force shared");
            System.out.printf("gather 8 threads: %d changes in %d forces (%.2f per force)%n", acks.size(),
                    st.forces(), acks.size() / (double) st.forces());
        }
    }

    /** Two processes of 8 threads each on one ledger: the merged acknowledgements against the file. */
    @Test
    void twoProcessesKeepOneHistory(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        Path childAcks = dir.resolve("child-acks");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), GatherChild.class.getName(), state.toString(), "8",
                "30", childAcks.toString()));
        List<String> acks;
        try (GpuScheduler s = Work.scheduler(state)) {
            Process child = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("child.log").toFile()).start();
            try {
                Path ready = Path.of(childAcks + ".ready");
                for (int i = 0; i < 6000 && !Files.exists(ready) && child.isAlive(); i++) {
                    Thread.sleep(10);
                }
                assertTrue(Files.exists(ready),
                        "the child did not start: " + Files.readString(dir.resolve("child.log")));
                Files.writeString(Path.of(childAcks + ".go"), "go");
                acks = new ArrayList<>(run(s, 8, 30));
                assertTrue(child.waitFor(100, TimeUnit.SECONDS), "the child did not finish (hang guard)");
                assertEquals(0, child.exitValue(), Files.readString(dir.resolve("child.log")));
            } finally {
                child.destroyForcibly();
            }
        }
        List<String> theirs = Files.readAllLines(childAcks);
        assertTrue(theirs.size() > 0, "the child acknowledged nothing");
        acks.addAll(theirs);
        History h = History.check(state.resolve("ledger"));
        h.acknowledged(acks);
        assertEquals(List.of(), h.violations, "ledger history of two processes");
        assertEquals(acks.size(), h.records, "records in the file vs both processes' acknowledged changes");
    }
}
