package io.gpusched.core.adversarial.durability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ledger on a small tmpfs that fills up while 8 threads commit batches: the changes whose batch could not be
 * written fail, and the file (replayed by {@link LedgerReplay}) holds exactly the acknowledged changes with
 * contiguous sequences; the scheduler's own view agrees; once space is freed, changes succeed again. Needs root
 * and a working {@code mount -t tmpfs} (skipped otherwise).
 */
@Tag("adversarial")
class FullDiskMidBatchAttackTest {

    private static int run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        return p.waitFor();
    }

    @Test
    void aDiskFillingUpMidBatchFailsExactlyTheUnwrittenChanges(@TempDir Path work) throws Exception {
        Path mnt = work.resolve("mnt");
        Files.createDirectories(mnt);
        int rc;
        try {
            rc = run("mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", mnt.toString());
        } catch (IOException e) {
            rc = -1;
        }
        Assumptions.assumeTrue(rc == 0, "mounting a small tmpfs needs root and the mount command (rc " + rc + ")");
        try {
            Path dir = mnt.resolve("state");
            List<String> acks = Collections.synchronizedList(new ArrayList<>());
            AtomicInteger failures = new AtomicInteger();
            try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
                // leave about 48 KiB free: the ledger grows past it during the run
                long free = Files.getFileStore(mnt).getUsableSpace();
                Path filler = mnt.resolve("filler");
                Files.write(filler, new byte[(int) Math.max(0, free - 48 * 1024)]);
                CountDownLatch go = new CountDownLatch(1);
                List<Thread> ts = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    Thread th = new Thread(() -> {
                        try {
                            go.await();
                        } catch (InterruptedException e) {
                            return;
                        }
                        for (int i = 0; i < 40; i++) {
                            Allocation a;
                            try {
                                a = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build());
                            } catch (RuntimeException e) {
                                failures.incrementAndGet();
                                continue;
                            }
                            acks.add("A " + a.id());
                            if (i % 3 == 0) {
                                continue;
                            }
                            try {
                                if (s.release(a.id())) {
                                    acks.add("R " + a.id());
                                }
                            } catch (RuntimeException e) {
                                failures.incrementAndGet();
                            }
                        }
                    });
                    th.start();
                    ts.add(th);
                }
                go.countDown();
                for (Thread th : ts) {
                    th.join();
                }
                assertTrue(failures.get() > 0, "the disk never filled up: the attack did not happen");
                checkFile(dir.resolve("ledger"), acks, s);
                Files.delete(filler);
                Allocation after = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build());
                acks.add("A " + after.id());
                checkFile(dir.resolve("ledger"), acks, s);
                System.out.printf("full disk: %d acknowledged, %d failed%n", acks.size(), failures.get());
            }
        } finally {
            run("umount", "-l", mnt.toString());
        }
    }

    private static void checkFile(Path ledger, List<String> acks, GpuScheduler s) throws IOException {
        LedgerReplay.Result r = LedgerReplay.replay(ledger);
        assertFalse(r.tornTail(), "a failed batch left a partial record at the end of " + ledger);
        Set<String> live = new TreeSet<>();
        synchronized (acks) {
            for (String a : acks) {
                if (a.startsWith("A ")) {
                    live.add(a.substring(2));
                } else {
                    live.remove(a.substring(2));
                }
            }
            assertEquals(acks.size(), r.records(), "records in the file vs acknowledged changes");
        }
        assertEquals(live, new TreeSet<>(r.live()), "live allocations: file vs acknowledgements");
        assertEquals(live, s.allocations().stream().map(Allocation::id).collect(Collectors.toCollection(TreeSet::new)),
                "live allocations: scheduler vs acknowledgements");
        for (int i = 0; i < r.sequences().size(); i++) {
            assertEquals(r.sequences().get(0) + i, (long) r.sequences().get(i), "sequences with a gap or repeat");
        }
    }
}
