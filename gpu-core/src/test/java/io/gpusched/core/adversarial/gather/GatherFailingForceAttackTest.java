package io.gpusched.core.adversarial.gather;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A write that cannot be made while 8 threads gather into batches: the ledger on a small tmpfs filled to the last
 * page (tmpfs is page-granular, so the ledger's last page is used up first by allocations until 20 in a row fail).
 * Every allocation of every batch fails; a release (a shorter record) may still fit the page and is then in the file;
 * the file holds exactly the acknowledged changes (byte for byte as before when none was), the scheduler's
 * allocations are as before less the acknowledged releases,
 * and once space is freed the same scheduler commits again. Needs root and {@code mount -t tmpfs} (skipped otherwise).
 */
@Tag("adversarial")
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class GatherFailingForceAttackTest {

    private static int run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        return p.waitFor();
    }

    private static TreeSet<String> ids(GpuScheduler s) {
        return s.allocations().stream().map(Allocation::id).collect(Collectors.toCollection(TreeSet::new));
    }

    @Test
    void aFullDiskFailsEveryChangeOfTheBatchAndLeavesFileAndStateAsBefore(@TempDir Path work) throws Exception {
        Path mnt = work.resolve("mnt");
        Files.createDirectories(mnt);
        int rc;
        try {
            rc = run("mount", "-t", "tmpfs", "-o", "size=512k,mode=0755", "tmpfs", mnt.toString());
        } catch (IOException e) {
            rc = -1;
        }
        Assumptions.assumeTrue(rc == 0, "mounting a small tmpfs needs root and the mount command (rc " + rc + ")");
        try {
            Path dir = mnt.resolve("state");
            Path ledger = dir.resolve("ledger");
            List<String> acks = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = Work.scheduler(dir)) {
                Allocation h1 = s.allocate(Work.one());
                Allocation h2 = s.allocate(Work.one());
                acks.add("A " + h1.id() + " " + String.join(",", h1.deviceUuids()));
                acks.add("A " + h2.id() + " " + String.join(",", h2.deviceUuids()));
                Path filler = mnt.resolve("filler");
                try (OutputStream o = Files.newOutputStream(filler)) {
                    byte[] page = new byte[4096];
                    while (true) {
                        o.write(page);
                    }
                } catch (IOException full) {
                    // the disk is full to the last page
                }
                // tmpfs is page-granular: the ledger's last page still has room; use it up one allocation at a time
                for (int fails = 0; fails < 20;) {
                    try {
                        Allocation a = s.allocate(Work.one());
                        acks.add("A " + a.id() + " " + String.join(",", a.deviceUuids()));
                        assertTrue(s.release(a.id()));
                        acks.add("R " + a.id());
                        fails = 0;
                    } catch (RuntimeException e) {
                        fails++;
                    }
                }
                TreeSet<String> before = ids(s);
                byte[] fileBefore = Files.readAllBytes(ledger);
                AtomicInteger failed = new AtomicInteger();
                AtomicInteger notHeld = new AtomicInteger();
                List<String> late = Collections.synchronizedList(new ArrayList<>());
                CountDownLatch go = new CountDownLatch(1);
                List<Thread> ts = new ArrayList<>();
                for (int t = 0; t < 8; t++) {
                    String mine = t == 0 ? h1.id() : t == 1 ? h2.id() : null;
                    Thread th = new Thread(() -> {
                        try {
                            go.await();
                        } catch (InterruptedException e) {
                            return;
                        }
                        for (int i = 0; i < 20; i++) {
                            try {
                                if (mine != null && i % 2 == 0) {
                                    if (s.release(mine)) {
                                        late.add("R " + mine);
                                    } else {
                                        notHeld.incrementAndGet(); // released earlier in this run
                                    }
                                } else {
                                    Allocation a = s.allocate(Work.one());
                                    late.add("A " + a.id() + " " + String.join(",", a.deviceUuids()));
                                }
                            } catch (RuntimeException e) {
                                failed.incrementAndGet();
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
                System.out.printf("full disk under 8 threads: %d failed, %d acknowledged %s, %d releases false;"
                        + " live now %s, held before %s%n", failed.get(), late.size(), late, notHeld.get(), ids(s),
                        before);
                assertTrue(late.stream().allMatch(a -> a.startsWith("R ")),
                        "allocations acknowledged while no allocation record could be written: " + late);
                assertEquals(160, failed.get() + late.size() + notHeld.get(), "changes failed, acknowledged or no-ops");
                assertEquals(0, notHeld.get() > 0 && late.isEmpty() ? notHeld.get() : 0,
                        "releases of a held allocation that returned false (none was made) while the disk was full");
                TreeSet<String> expected = new TreeSet<>(before);
                late.forEach(r -> expected.remove(r.substring(2)));
                assertEquals(expected, ids(s), "live allocations after the failed batches");
                if (late.isEmpty()) {
                    assertArrayEquals(fileBefore, Files.readAllBytes(ledger), "the ledger file changed");
                }
                acks.addAll(late);
                History mid = History.check(ledger);
                mid.acknowledged(acks);
                assertEquals(List.of(), mid.violations, "ledger history while full");
                assertEquals(acks.size(), mid.records, "records in the file vs acknowledged changes while full");
                Files.delete(filler);
                for (Allocation held : List.of(h1, h2)) {
                    if (!late.contains("R " + held.id())) {
                        assertTrue(s.release(held.id()), "a held allocation is still releasable");
                        acks.add("R " + held.id());
                    }
                }
                Allocation after = s.allocate(Work.one());
                acks.add("A " + after.id() + " " + String.join(",", after.deviceUuids()));
                History h = History.check(ledger);
                h.acknowledged(acks);
                assertEquals(List.of(), h.violations, "ledger history");
                assertEquals(acks.size(), h.records, "records in the file vs acknowledged changes");
            }
        } finally {
            run("umount", "-l", mnt.toString());
        }
    }
}
