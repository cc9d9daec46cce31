package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.LedgerException;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.testing.ManualClock;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of the node ledger written from the public API and the documented on-disk format only
 * ({@code <sequence> <crc32c of "<sequence> <json>"> <json>} after one header line). Every check is made by the
 * test's own bookkeeping or its own parser of the file, never by asking the scheduler whether it was right.
 */
@Tag("adversarial")
class LedgerAttackTest {

    @TempDir
    Path tmp;

    private static GpuScheduler open(Path dir) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    private static GpuRequest one() {
        return GpuRequest.builder().count(1).exclusive().build();
    }

    /** id -> device indices of the live allocations. */
    private static Map<String, List<Integer>> live(GpuScheduler s) {
        Map<String, List<Integer>> m = new TreeMap<>();
        for (Allocation a : s.allocations()) {
            m.put(a.id(), a.deviceIndices());
        }
        return m;
    }

    /** Our own parser: checks every complete record line's checksum and sequence order; returns the record count. */
    static int checkFile(Path ledger) throws IOException {
        List<String> lines = Files.readAllLines(ledger, StandardCharsets.UTF_8);
        assertTrue(lines.size() >= 1, "a ledger has a header");
        assertTrue(lines.get(0).startsWith("gpusched-ledger "), "header: " + lines.get(0));
        long prev = -1;
        for (int i = 1; i < lines.size(); i++) {
            String l = lines.get(i);
            int a = l.indexOf(' ');
            int b = l.indexOf(' ', a + 1);
            assertTrue(a > 0 && b == a + 9, "line " + (i + 1) + " is not '<seq> <crc> <json>': " + l);
            long seq = Long.parseLong(l.substring(0, a));
            CRC32C c = new CRC32C();
            c.update((l.substring(0, a) + " " + l.substring(b + 1)).getBytes(StandardCharsets.UTF_8));
            assertEquals(String.format("%08x", c.getValue()), l.substring(a + 1, b).toLowerCase(),
                    "checksum of line " + (i + 1) + ": " + l);
            if (prev >= 0) {
                assertEquals(prev + 1, seq, "sequences increase by one at line " + (i + 1));
            }
            prev = seq;
        }
        return lines.size() - 1;
    }

    /** A small ledger: three allocations, the first released. Returns the directory. */
    private Path smallLedger(String name) {
        Path dir = tmp.resolve(name);
        try (GpuScheduler s = open(dir)) {
            String a1 = s.allocate(one()).id();
            s.allocate(GpuRequest.builder().count(1).exclusive().owner("j\u00f6rg-\u65e5\u672c").build());
            s.allocate(GpuRequest.builder().count(1).exclusive().label("city", "Z\u00fcrich \uD83D\uDE80").build());
            assertTrue(s.release(a1));
        }
        return dir;
    }

    private static void copyWith(Path srcDir, Path dstDir, byte[] ledger) throws IOException {
        Files.createDirectories(dstDir);
        Files.setPosixFilePermissions(dstDir, PosixFilePermissions.fromString("rwx------"));
        Path f = dstDir.resolve("ledger");
        Files.write(f, ledger);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-------"));
    }

    // ---------------------------------------------------------------------------------------------------------------
    // torn tails of every length

    @Test
    void aTornTailOfEveryLengthIsCutAndTheNextAppendLeavesAValidLedger() throws Exception {
        Path src = smallLedger("src");
        byte[] full = Files.readAllBytes(src.resolve("ledger"));
        int headerEnd = indexOf(full, (byte) '\n', 0) + 1;
        Map<String, List<Integer>> expectedFull;
        try (GpuScheduler s = open(src)) {
            expectedFull = live(s);
        }
        assertEquals(2, expectedFull.size());
        for (int len = 0; len < headerEnd; len++) {
            Path dir = tmp.resolve("torn-header-" + len);
            copyWith(src, dir, java.util.Arrays.copyOf(full, len));
            try (GpuScheduler s = open(dir)) {
                assertEquals(Map.of(), live(s), "a torn header holds no allocation, len " + len);
                s.release(s.allocate(one()).id());
            } catch (LedgerException e) {
                assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
            }
        }
        Map<String, List<Integer>> atBoundary = null;
        for (int len = headerEnd; len <= full.length; len++) {
            Path dir = tmp.resolve("torn-" + len);
            byte[] cut = java.util.Arrays.copyOf(full, len);
            copyWith(src, dir, cut);
            boolean boundary = full[len - 1] == '\n';
            Map<String, List<Integer>> seen;
            String newId;
            try (GpuScheduler s = open(dir)) {
                seen = live(s);
                if (boundary) {
                    atBoundary = seen;
                } else {
                    assertEquals(atBoundary, seen, "a torn tail of " + (len) + " bytes shows what the last whole"
                            + " record showed");
                    assertFalse(s.recoveryProblems().isEmpty(), "the cut is reported at length " + len);
                }
                // the next change must land on a clean line
                Allocation extra = s.tryAllocate(one()).orElse(null);
                newId = extra == null ? null : extra.id();
            }
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler s = open(dir)) {
                Map<String, List<Integer>> again = live(s);
                if (newId != null) {
                    assertTrue(again.containsKey(newId), "the allocation made after the cut survives, len " + len);
                    again.remove(newId);
                }
                assertEquals(seen, again, "reopen after cut + append, len " + len);
            }
        }
        assertEquals(expectedFull, atBoundary);
    }

    // ---------------------------------------------------------------------------------------------------------------
    // a flipped byte in every position

    @Test
    void aFlippedByteAnywhereIsNeverMisread() throws Exception {
        Path src = smallLedger("src");
        byte[] full = Files.readAllBytes(src.resolve("ledger"));
        Map<String, List<Integer>> expected;
        try (GpuScheduler s = open(src)) {
            expected = live(s);
        }
        int lastLineStart = lastIndexOf(full, (byte) '\n', full.length - 2) + 1;
        Map<String, List<Integer>> beforeLast;
        Path pre = tmp.resolve("pre");
        copyWith(src, pre, java.util.Arrays.copyOf(full, lastLineStart));
        try (GpuScheduler s = open(pre)) {
            beforeLast = live(s);
        }
        List<String> problems = new ArrayList<>();
        for (int p = 0; p < full.length; p++) {
            byte[] bad = full.clone();
            bad[p] ^= 0x01;
            Path dir = tmp.resolve("flip-" + p);
            copyWith(src, dir, bad);
            try (GpuScheduler s = open(dir)) {
                Map<String, List<Integer>> seen = live(s);
                boolean ok = seen.equals(expected) || (p >= lastLineStart && seen.equals(beforeLast));
                if (!ok) {
                    problems.add("flip at " + p + " ('" + (char) full[p] + "') misread: " + seen);
                }
            } catch (LedgerException e) {
                if (p >= headerEnd(full) && e.kind() != LedgerException.Kind.CORRUPT) {
                    problems.add("flip at " + p + ": kind " + e.kind() + ": " + e.getMessage());
                }
                if (!e.getMessage().contains(dir.toString())) {
                    problems.add("flip at " + p + ": message does not name the file: " + e.getMessage());
                }
            } catch (RuntimeException e) {
                problems.add("flip at " + p + " ('" + (char) full[p] + "'): " + e);
            }
        }
        assertEquals(List.of(), problems);
    }

    private static int headerEnd(byte[] b) {
        return indexOf(b, (byte) '\n', 0) + 1;
    }

    private static int indexOf(byte[] b, byte x, int from) {
        for (int i = from; i < b.length; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }

    private static int lastIndexOf(byte[] b, byte x, int from) {
        for (int i = from; i >= 0; i--) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }

    // ---------------------------------------------------------------------------------------------------------------
    // hostile files and permissions

    @Test
    void aFifoInPlaceOfTheLedgerIsRefusedWithoutHanging() throws Exception {
        Path dir = tmp.resolve("fifo");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        Process mk = new ProcessBuilder("mkfifo", "-m", "600", dir.resolve("ledger").toString()).start();
        assumeTrue(mk.waitFor() == 0, "mkfifo available");
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try (GpuScheduler s = open(dir)) {
                s.allocate(one());
            } catch (Throwable e) {
                thrown.set(e);
            } finally {
                done.countDown();
            }
        });
        t.setDaemon(true);
        t.start();
        if (!done.await(30, TimeUnit.SECONDS)) {
            // unblock the reader so the thread can end, then fail
            try (var w = Files.newOutputStream(dir.resolve("ledger"))) {
                w.write('\n');
            } catch (IOException ignored) {
                // nothing
            }
            fail("opening a FIFO as the ledger hangs");
        }
        assertTrue(thrown.get() instanceof LedgerException, "typed refusal, was " + thrown.get());
        assertTrue(thrown.get().getMessage().contains("ledger"), thrown.get().getMessage());
    }

    @Test
    void aDirectoryInPlaceOfTheLedgerIsATypedError() throws Exception {
        Path dir = tmp.resolve("d");
        Files.createDirectories(dir.resolve("ledger"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        try (GpuScheduler s = open(dir)) {
            s.allocate(one());
            fail("a directory as ledger was used");
        } catch (LedgerException e) {
            assertTrue(e.getMessage().contains(dir.resolve("ledger").toString()), e.getMessage());
        }
    }

    @Test
    void aLedgerSymlinkToAWorldWritableFileIsRefused() throws Exception {
        Path src = smallLedger("src");
        Path target = tmp.resolve("elsewhere");
        Files.copy(src.resolve("ledger"), target);
        Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rw-rw-rw-"));
        Files.delete(src.resolve("ledger"));
        Files.createSymbolicLink(src.resolve("ledger"), target);
        try (GpuScheduler s = open(src)) {
            s.allocate(one());
            fail("a ledger any user may write was trusted");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
        }
    }

    @Test
    void aWorldWritableLockFileIsRefused() throws Exception {
        Path src = smallLedger("src");
        Path lock = src.resolve("ledger.lock");
        assertTrue(Files.exists(lock), "opening a ledger creates its lock file " + lock + " (NodeLedger's Javadoc)");
        Files.setPosixFilePermissions(lock, PosixFilePermissions.fromString("rw-rw-rw-"));
        try (GpuScheduler s = open(src)) {
            s.allocate(one());
            fail("a lock file any user may write was trusted");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
        }
    }

    @Test
    void aGroupWritableStateDirIsRefusedNamingPathAndMode() throws Exception {
        Path dir = tmp.resolve("g");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwx---"));
        try (GpuScheduler s = open(dir)) {
            s.allocate(one());
            fail("group-writable state dir used");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind());
            assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
            assertTrue(e.getMessage().contains("770") || e.getMessage().contains("rwxrwx---"), e.getMessage());
        }
    }

    @Test
    void aNewerFormatIsRefusedNotMisread() throws Exception {
        Path src = smallLedger("src");
        String text = Files.readString(src.resolve("ledger"));
        String header = text.substring(0, text.indexOf('\n'));
        String[] h = header.split(" ");
        // the documented header: "gpusched-ledger <format> ... <crc32c of everything before it>"; forge format 2
        String body = header.substring(0, header.lastIndexOf(' '));
        CRC32C c = new CRC32C();
        c.update(body.getBytes(StandardCharsets.UTF_8));
        assertEquals(String.format("%08x", c.getValue()), h[h.length - 1], "the header's last field is the crc32c"
                + " of the fields before it, as NodeLedger's Javadoc says: " + header);
        h[1] = "2";
        String body2 = String.join(" ", java.util.Arrays.copyOf(h, h.length - 1));
        c.reset();
        c.update(body2.getBytes(StandardCharsets.UTF_8));
        String forged = body2 + " " + String.format("%08x", c.getValue()) + text.substring(text.indexOf('\n'));
        Files.writeString(src.resolve("ledger"), forged);
        try (GpuScheduler s = open(src)) {
            s.allocations();
            fail("a newer format was read");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.NEWER_FORMAT, e.kind(), e.getMessage());
        }
        assertEquals(forged, Files.readString(src.resolve("ledger")), "a refused ledger is left alone");
    }

    // ---------------------------------------------------------------------------------------------------------------
    // the ledger removed or replaced under a running process

    @Test
    void aLedgerDeletedUnderARunningProcessIsNotForkedSilently() throws Exception {
        Path dir = tmp.resolve("del");
        try (GpuScheduler a = open(dir)) {
            Allocation first = a.allocate(one());
            Files.delete(dir.resolve("ledger"));
            Allocation second = null;
            try {
                second = a.allocate(one());
            } catch (LedgerException e) {
                // refusing is acceptable
            }
            if (second != null) {
                assertTrue(Files.exists(dir.resolve("ledger")), "an acknowledged change is in a file on disk");
                checkFile(dir.resolve("ledger"));
                try (GpuScheduler b = open(dir)) {
                    Map<String, List<Integer>> seenByB = live(b);
                    assertTrue(seenByB.containsKey(second.id()), "another process sees the acknowledged change "
                            + second.id() + ", sees " + seenByB);
                    assertEquals(live(a), seenByB, "both processes agree on the node's allocations");
                    Set<Integer> taken = new HashSet<>();
                    for (List<Integer> d : seenByB.values()) {
                        taken.addAll(d);
                    }
                    for (Allocation x; (x = b.tryAllocate(one()).orElse(null)) != null; ) {
                        for (int d : x.deviceIndices()) {
                            assertTrue(taken.add(d), "device " + d + " handed out twice after the delete");
                        }
                    }
                }
            }
            assertNotNull(first);
        }
    }

    @Test
    void aLedgerReplacedByAnOlderCopyIsFollowedNotWrittenBehind() throws Exception {
        Path dir = tmp.resolve("repl");
        try (GpuScheduler a = open(dir)) {
            a.allocate(one());
            Path backup = tmp.resolve("backup");
            Files.copy(dir.resolve("ledger"), backup);
            a.allocate(one());
            Files.move(backup, dir.resolve("ledger"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            Allocation third = a.allocate(one());
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler b = open(dir)) {
                assertTrue(live(b).containsKey(third.id()), "the change acknowledged after the replace is on disk");
                assertEquals(live(a), live(b));
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------------
    // several schedulers ("processes") on one state dir in this JVM

    @Test
    void concurrentSchedulersOnOneDirNeverHandOutADeviceTwice() throws Exception {
        Path dir = tmp.resolve("conc");
        String old = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "2048");
        List<GpuScheduler> scheds = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                scheds.add(open(dir));
            }
            String firstHeader = Files.readAllLines(dir.resolve("ledger")).get(0);
            Object modelLock = new Object();
            Map<Integer, String> heldBy = new HashMap<>();
            Set<String> ids = ConcurrentHashMap.newKeySet();
            List<String> violations = new CopyOnWriteArrayList<>();
            Map<String, List<Integer>> mine = new ConcurrentHashMap<>();
            int threads = 6;
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                final int seed = t;
                Thread th = new Thread(() -> {
                    Random r = new Random(seed);
                    List<Allocation> held = new ArrayList<>();
                    try {
                        start.await();
                        for (int op = 0; op < 150; op++) {
                            GpuScheduler s = scheds.get(r.nextInt(scheds.size()));
                            if (held.isEmpty() || r.nextInt(3) == 0) {
                                Allocation a = s.tryAllocate(one()).orElse(null);
                                if (a != null) {
                                    if (!ids.add(a.id())) {
                                        violations.add("duplicate id " + a.id());
                                    }
                                    synchronized (modelLock) {
                                        for (int d : a.deviceIndices()) {
                                            String prev = heldBy.putIfAbsent(d, a.id());
                                            if (prev != null) {
                                                violations.add("device " + d + " given to " + a.id()
                                                        + " while " + prev + " holds it");
                                            }
                                        }
                                    }
                                    held.add(a);
                                    mine.put(a.id(), a.deviceIndices());
                                }
                            } else if (r.nextInt(4) == 0) {
                                Allocation a = held.get(r.nextInt(held.size()));
                                Allocation renewed = s.renew(a.id(), Duration.ofHours(1));
                                if (!renewed.deviceIndices().equals(a.deviceIndices())) {
                                    violations.add("renew changed devices of " + a.id());
                                }
                            } else {
                                Allocation a = held.remove(r.nextInt(held.size()));
                                synchronized (modelLock) {
                                    for (int d : a.deviceIndices()) {
                                        heldBy.remove(d, a.id());
                                    }
                                }
                                mine.remove(a.id());
                                if (!s.release(a.id())) {
                                    violations.add("release of live " + a.id() + " returned false");
                                }
                            }
                        }
                    } catch (Throwable e) {
                        violations.add("thread " + seed + ": " + e);
                    }
                });
                ts.add(th);
                th.start();
            }
            start.countDown();
            for (Thread th : ts) {
                th.join();
            }
            assertEquals(List.of(), violations);
            Map<String, List<Integer>> expected = new TreeMap<>(mine);
            for (GpuScheduler s : scheds) {
                assertEquals(expected, live(s), "every scheduler agrees with the acknowledgements");
            }
            checkFile(dir.resolve("ledger"));
            String lastHeader = Files.readAllLines(dir.resolve("ledger")).get(0);
            assertFalse(firstHeader.split(" ")[3].equals(lastHeader.split(" ")[3]),
                    "the ledger was compacted during the run: " + firstHeader + " / " + lastHeader);
            try (GpuScheduler fresh = open(dir)) {
                assertEquals(expected, live(fresh), "a fresh process sees exactly the acknowledged state");
            }
        } finally {
            scheds.forEach(GpuScheduler::close);
            if (old == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", old);
            }
        }
    }

    @Test
    void refreshGivesEachForeignChangeToListenersExactlyOnce() throws Exception {
        Path dir = tmp.resolve("events");
        Map<String, Integer> allocated = new ConcurrentHashMap<>();
        Map<String, Integer> released = new ConcurrentHashMap<>();
        GpuScheduler a = GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .listener(e -> {
                    if (e.allocationId().isEmpty()) {
                        return;
                    }
                    if (e.type() == AllocationEvent.Type.ALLOCATED) {
                        allocated.merge(e.allocationId().get(), 1, Integer::sum);
                    } else if (e.type() == AllocationEvent.Type.RELEASED) {
                        released.merge(e.allocationId().get(), 1, Integer::sum);
                    }
                })
                .build();
        try (a; GpuScheduler b = open(dir)) {
            CountDownLatch stop = new CountDownLatch(1);
            List<Thread> readers = new ArrayList<>();
            List<Throwable> errors = new CopyOnWriteArrayList<>();
            for (int i = 0; i < 3; i++) {
                final int k = i;
                Thread t = new Thread(() -> {
                    try {
                        while (stop.getCount() > 0) {
                            if (k == 0) {
                                a.refresh();
                            } else if (k == 1) {
                                a.allocations();
                            } else {
                                a.status();
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                });
                readers.add(t);
                t.start();
            }
            Set<String> bAllocated = new HashSet<>();
            Set<String> bReleased = new HashSet<>();
            for (int i = 0; i < 60; i++) {
                Allocation x = b.allocate(one());
                bAllocated.add(x.id());
                if (i % 3 != 0) {
                    b.release(x.id());
                    bReleased.add(x.id());
                }
                if (b.allocations().size() == 4) {
                    for (Allocation y : b.allocations()) {
                        b.release(y.id());
                        bReleased.add(y.id());
                    }
                }
            }
            stop.countDown();
            for (Thread t : readers) {
                t.join();
            }
            a.refresh();
            assertEquals(List.of(), errors);
            Map<String, Integer> expectA = new TreeMap<>();
            bAllocated.forEach(id -> expectA.put(id, 1));
            Map<String, Integer> expectR = new TreeMap<>();
            bReleased.forEach(id -> expectR.put(id, 1));
            assertEquals(expectA, new TreeMap<>(allocated), "ALLOCATED once per foreign allocation");
            assertEquals(expectR, new TreeMap<>(released), "RELEASED once per foreign release");
        }
    }

    @Test
    void releaseAndRenewWorkAcrossSchedulersAndTheOwnerSeesIt() throws Exception {
        Path dir = tmp.resolve("x");
        try (GpuScheduler a = open(dir); GpuScheduler b = open(dir)) {
            Allocation x = a.allocate(one());
            Allocation renewed = b.renew(x.id(), Duration.ofHours(2));
            assertEquals(x.deviceIndices(), renewed.deviceIndices());
            assertEquals(renewed.expiresAt(), a.allocation(x.id()).orElseThrow().expiresAt(),
                    "the owner sees the foreign renew");
            assertTrue(b.release(x.id()));
            assertTrue(a.allocation(x.id()).isEmpty());
            assertFalse(a.release(x.id()), "a second release by the owner reports it was already released");
            try {
                b.renew(x.id(), Duration.ofHours(1));
                fail("renewed a released allocation");
            } catch (GpuAllocationException e) {
                assertEquals(GpuAllocationException.Reason.UNKNOWN_ALLOCATION, e.reason());
            }
        }
    }

    @Test
    void aWaiterInOneSchedulerWakesWhenAnotherReleases() throws Exception {
        Path dir = tmp.resolve("wait");
        try (GpuScheduler a = open(dir); GpuScheduler b = open(dir)) {
            List<Allocation> all = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                all.add(a.allocate(one()));
            }
            AtomicReference<Object> got = new AtomicReference<>();
            CountDownLatch waiting = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    waiting.countDown();
                    got.set(b.allocate(one(), Duration.ofSeconds(60)));
                } catch (Throwable e) {
                    got.set(e);
                }
            });
            t.start();
            waiting.await();
            a.release(all.get(2).id());
            t.join();
            assertTrue(got.get() instanceof Allocation, "the waiter got the released device: " + got.get());
            assertEquals(all.get(2).deviceIndices(), ((Allocation) got.get()).deviceIndices());
        }
    }

    // ---------------------------------------------------------------------------------------------------------------
    // holder processes

    @Test
    void aLivePidWithAnotherStartTimeIsNotTheHolder() throws Exception {
        Path dir = tmp.resolve("pid");
        HolderProcess me = HolderProcess.current();
        HolderProcess impostor = new HolderProcess(me.pid(), me.startTime() + 1);
        assertFalse(impostor.isAlive());
        try (GpuScheduler a = open(dir)) {
            String id = null;
            try {
                id = a.allocate(GpuRequest.builder().count(1).exclusive().holder(impostor).build()).id();
            } catch (GpuAllocationException e) {
                // refusing a dead holder up front is fine
            }
            a.refresh();
            if (id != null) {
                assertTrue(a.allocation(id).isEmpty(), "an allocation bound to a gone holder is reclaimed");
            }
            assertEquals(4, countFree(a));
        }
    }

    @Test
    void aZombieHolderIsGone() throws Exception {
        Path dir = tmp.resolve("zombie");
        // sh starts a short child, then execs sleep, which never reaps it: the child becomes a zombie
        Process p = new ProcessBuilder("sh", "-c", "sleep 0.3 & echo $!; exec sleep 60").start();
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            long pid = Long.parseLong(r.readLine().trim());
            HolderProcess holder = HolderProcess.of(pid);
            try (GpuScheduler a = open(dir)) {
                Allocation x = a.allocate(GpuRequest.builder().count(1).exclusive().holder(holder).build());
                // wait (no deadline but the test's) until the kernel shows the child as a zombie
                Path stat = Path.of("/proc/" + pid + "/stat");
                while (true) {
                    String s = Files.readString(stat);
                    if (s.substring(s.lastIndexOf(')') + 2).startsWith("Z")) {
                        break;
                    }
                    Thread.sleep(20);
                }
                a.refresh();
                assertTrue(a.allocation(x.id()).isEmpty(), "a zombie holder has exited: its allocation is reclaimed");
            }
        } finally {
            p.destroyForcibly();
            p.waitFor();
        }
    }

    private static int countFree(GpuScheduler s) {
        Set<Integer> used = new HashSet<>();
        s.allocations().forEach(a -> used.addAll(a.deviceIndices()));
        return 4 - used.size();
    }

    // ---------------------------------------------------------------------------------------------------------------
    // full disk and read-only mount

    private Path mountTmpfs(String name, String opts) throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root to mount a tmpfs");
        Path m = tmp.resolve(name);
        Files.createDirectories(m);
        Process p = new ProcessBuilder("mount", "-t", "tmpfs", "-o", opts, "tmpfs", m.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(p.waitFor() == 0, "mount tmpfs: " + out);
        return m;
    }

    private static void umount(Path m) throws Exception {
        new ProcessBuilder("umount", "-l", m.toString()).start().waitFor();
    }

    @Test
    void aFullDiskFailsChangesCleanlyAndLosesNothing() throws Exception {
        Path m = mountTmpfs("full", "size=96k,mode=0700");
        try {
            Path dir = m.resolve("state");
            Map<String, List<Integer>> acked = new TreeMap<>();
            int noSpace = 0;
            try (GpuScheduler a = open(dir)) {
                // fill the disk but for a few bytes
                Path filler = m.resolve("filler");
                try (var out = Files.newOutputStream(filler)) {
                    byte[] chunk = new byte[512];
                    while (true) {
                        out.write(chunk);
                        out.flush();
                    }
                } catch (IOException full) {
                    // the disk is full
                }
                for (int i = 0; i < 200 && noSpace < 3; i++) {
                    Map<String, List<Integer>> before = live(a);
                    try {
                        if (acked.size() < 4 && (i % 2 == 0 || acked.isEmpty())) {
                            Allocation x = a.allocate(one());
                            acked.put(x.id(), x.deviceIndices());
                        } else {
                            String id = acked.keySet().iterator().next();
                            assertTrue(a.release(id));
                            acked.remove(id);
                        }
                    } catch (LedgerException e) {
                        assertEquals(LedgerException.Kind.NO_SPACE, e.kind(), e.getMessage());
                        noSpace++;
                        assertEquals(before, live(a), "a change that failed on a full disk left the state alone");
                    }
                    assertEquals(acked, live(a));
                }
                assertTrue(noSpace > 0, "the disk filled up");
                try (GpuScheduler b = open(dir)) {
                    assertEquals(acked, live(b), "a second process on the full disk sees what was acknowledged");
                }
                Files.delete(filler);
                Allocation after = null;
                if (acked.size() < 4) {
                    after = a.allocate(one());
                    acked.put(after.id(), after.deviceIndices());
                } else {
                    String id = acked.keySet().iterator().next();
                    assertTrue(a.release(id));
                    acked.remove(id);
                }
            }
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler c = open(dir)) {
                assertEquals(acked, live(c), "after space returns, the ledger is whole and shows every"
                        + " acknowledged change");
            }
        } finally {
            umount(m);
        }
    }

    @Test
    void aReadOnlyStateDirGivesTypedErrors() throws Exception {
        Path m = mountTmpfs("ro", "size=1m,mode=0700");
        try {
            Path dir = m.resolve("state");
            String id;
            try (GpuScheduler a = open(dir)) {
                id = a.allocate(one()).id();
            }
            Process p = new ProcessBuilder("mount", "-o", "remount,ro", m.toString()).start();
            assumeTrue(p.waitFor() == 0, "remount ro");
            try (GpuScheduler b = open(dir)) {
                // reading may work; changing must fail typed
                try {
                    assertEquals(Set.of(id), live(b).keySet());
                    b.allocate(one());
                    fail("allocated on a read-only ledger");
                } catch (LedgerException e) {
                    assertTrue(e.getMessage().contains(m.toString()), e.getMessage());
                }
            } catch (LedgerException e) {
                assertTrue(e.getMessage().contains(m.toString()), e.getMessage());
            }
        } finally {
            umount(m);
        }
    }

    // ---------------------------------------------------------------------------------------------------------------
    // leases, clocks, waiting


    private static GpuScheduler open(Path dir, java.time.Clock clock) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .clock(clock)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    @Test
    void aSubMillisecondLeaseSurvivesARestartWhileItHasNotEnded() throws Exception {
        Path dir = tmp.resolve("nanos");
        java.time.Instant t0 = java.time.Instant.parse("2026-01-01T00:00:00Z");
        ManualClock clock = new ManualClock(t0);
        String id;
        try (GpuScheduler a = open(dir, clock)) {
            id = a.allocate(GpuRequest.builder().count(1).exclusive().maxDuration(Duration.ofNanos(500)).build()).id();
        }
        try (GpuScheduler b = open(dir, clock)) {
            Allocation x = b.allocation(id).orElse(null);
            assertNotNull(x, "an acknowledged 500 ns lease that has not ended is live after a restart");
            assertTrue(x.expiresAt().orElseThrow().isAfter(t0), "expiry " + x.expiresAt());
        }
    }

    @Test
    void aClockGoingBackwardsEndsNoLeaseEarly() throws Exception {
        Path dir = tmp.resolve("back");
        java.time.Instant t0 = java.time.Instant.parse("2026-01-01T12:00:00Z");
        ManualClock clock = new ManualClock(t0);
        try (GpuScheduler a = open(dir, clock); GpuScheduler b = open(dir, clock)) {
            Allocation x = a.allocate(GpuRequest.builder().count(1).exclusive().maxDuration(Duration.ofMinutes(10))
                    .build());
            clock.set(t0.minus(Duration.ofDays(1)));
            a.maintain();
            b.maintain();
            assertTrue(b.allocation(x.id()).isPresent(), "a lease is not ended by a clock going back");
            Allocation r = b.renew(x.id(), Duration.ofMinutes(5));
            assertEquals(x.deviceIndices(), r.deviceIndices());
            clock.set(t0.plus(Duration.ofMinutes(1)));
            a.maintain();
            assertTrue(a.allocation(x.id()).isPresent(), "still inside the first lease");
        }
    }

    @Test
    void aRequestLargerThanTheNodeFailsAtOnceEvenWhenWaiting() throws Exception {
        Path dir = tmp.resolve("big");
        try (GpuScheduler a = open(dir)) {
            AtomicReference<Object> got = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                try {
                    got.set(a.allocate(GpuRequest.builder().count(5).exclusive().build(), Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    got.set(e);
                } finally {
                    done.countDown();
                }
            });
            t.setDaemon(true);
            t.start();
            assertTrue(done.await(60, TimeUnit.SECONDS), "5 GPUs on a 4-GPU node are refused, not waited for");
            assertTrue(got.get() instanceof GpuAllocationException, "was " + got.get());
            assertFalse(((GpuAllocationException) got.get()).reason().isTransient(), got.get().toString());
        }
    }

    @Test
    void aWaiterWhoseStrategyThrowsHandsTheQueueOn() throws Exception {
        Path dir = tmp.resolve("boom");
        io.gpusched.core.AllocationStrategy packing = io.gpusched.core.AllocationStrategies.packing();
        io.gpusched.core.AllocationStrategy boom = new io.gpusched.core.AllocationStrategy() {
            @Override
            public String name() {
                return "boom";
            }

            @Override
            public List<Integer> select(GpuRequest request, io.gpusched.core.SchedulingView view) {
                if (request.labels().containsKey("boom")) {
                    throw new IllegalStateException("strategy failure injected by the test");
                }
                return packing.select(request, view);
            }
        };
        try (GpuScheduler other = open(dir);
                GpuScheduler s = GpuScheduler.builder()
                        .inventory(NodeDescriptions.profile("pcie-4xa10"))
                        .stateDir(dir)
                        .strategy(boom)
                        .maintenanceInterval(Duration.ZERO)
                        .build()) {
            List<Allocation> all = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                all.add(other.allocate(one()));
            }
            AtomicReference<Object> first = new AtomicReference<>();
            AtomicReference<Object> second = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(2);
            Thread t1 = new Thread(() -> {
                try {
                    first.set(s.allocate(GpuRequest.builder().count(1).exclusive().label("boom", "1").build(),
                            Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    first.set(e);
                } finally {
                    done.countDown();
                }
            });
            Thread t2 = new Thread(() -> {
                try {
                    second.set(s.allocate(one(), Duration.ofMinutes(10)));
                } catch (Throwable e) {
                    second.set(e);
                } finally {
                    done.countDown();
                }
            });
            t1.setDaemon(true);
            t2.setDaemon(true);
            t1.start();
            awaitBlocked(t1);
            t2.start();
            awaitBlocked(t2);
            other.release(all.get(0).id());
            assertTrue(done.await(60, TimeUnit.SECONDS), "both waiters ended: " + first.get() + " / " + second.get());
            assertTrue(first.get() instanceof RuntimeException, "the failing waiter failed: " + first.get());
            assertTrue(second.get() instanceof Allocation, "the next waiter got the freed GPU: " + second.get());
        }
    }

    /**
     * Waits until the thread is parked (waiting inside allocate), by observing its state, or has ended (a scheduler
     * that decides on its last snapshot may run the strategy before it has caught up with another process, and a
     * strategy that throws then fails the call at once instead of after a wait).
     */
    private static void awaitBlocked(Thread t) throws InterruptedException {
        while (t.getState() != Thread.State.TIMED_WAITING && t.getState() != Thread.State.WAITING
                && t.getState() != Thread.State.TERMINATED) {
            Thread.sleep(5);
        }
        Thread.sleep(50);
    }

    @Test
    void closeWakesAWaiter() throws Exception {
        Path dir = tmp.resolve("close");
        GpuScheduler a = open(dir);
        for (int i = 0; i < 4; i++) {
            a.allocate(one());
        }
        AtomicReference<Object> got = new AtomicReference<>();
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                started.countDown();
                got.set(a.allocate(one(), Duration.ofMinutes(10)));
            } catch (Throwable e) {
                got.set(e);
            } finally {
                done.countDown();
            }
        });
        t.setDaemon(true);
        t.start();
        started.await();
        a.close();
        assertTrue(done.await(60, TimeUnit.SECONDS), "a waiter of a closed scheduler ends");
        assertFalse(got.get() instanceof Allocation, "a closed scheduler allocated: " + got.get());
    }
}
