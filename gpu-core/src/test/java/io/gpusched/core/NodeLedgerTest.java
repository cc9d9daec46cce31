package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assumptions.assumeThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.host.StateDirectory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The node ledger in one JVM: restarts, damaged files, permissions, a full disk, compaction, reclaim. */
class NodeLedgerTest {

    static GpuScheduler open(Path dir) {
        return open(dir, null);
    }

    static GpuScheduler open(Path dir, AllocationListener l) {
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO);
        if (l != null) {
            b.listener(l);
        }
        return b.build();
    }

    @Test
    void allocationsSurviveARestartWithUniqueIdsAndSubMillisecondLeases(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        String keep;
        String gone;
        Allocation lease;
        try (GpuScheduler s = open(dir)) {
            keep = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=alice", "--label=k=v")).id();
            gone = s.allocate(GpuRequests.fromCliFlags("--shared=4GB", "--job=j1")).id();
            lease = s.allocate(GpuRequest.builder().maxDuration(Duration.ofNanos(500)).build());
            s.release(gone);
        }
        try (GpuScheduler s = open(dir)) {
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(keep, lease.id());
            assertThat(s.allocation(keep).orElseThrow().request().labels()).containsEntry("k", "v");
            assertThat(s.allocation(lease.id()).orElseThrow().expiresAt()).as("a 500 ns lease is kept exactly")
                    .isEqualTo(lease.expiresAt());
            assertThat(s.allocation(lease.id()).orElseThrow().request().maxDuration()).contains(Duration.ofNanos(500));
            assertThat(s.release(gone)).as("released before the restart: known, not live").isFalse();
            Allocation next = s.allocate(GpuRequest.builder().build());
            assertThat(next.id()).isNotIn(keep, gone, lease.id());
            assertThat(s.recoveryProblems()).isEmpty();
            assertThat(s.stateDir()).contains(dir.toAbsolutePath().normalize());
        }
    }

    @Test
    void ledgerStatisticsCountWhatThisProcessForcedAndNothingElse(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler mem = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            assertThat(mem.ledgerStatistics()).as("in memory: no ledger, no figures").isEmpty();
        }
        try (GpuScheduler other = open(dir); GpuScheduler s = open(dir)) {
            LedgerStatistics before = s.ledgerStatistics().orElseThrow();
            long linesBefore = recordLines(dir);
            String a = s.allocate(GpuRequests.fromCliFlags("--gpu=1")).id();
            String b = s.allocate(GpuRequests.fromCliFlags("--gpu=2")).id();
            s.release(a);
            other.allocate(GpuRequests.fromCliFlags("--gpu=1"));
            LedgerStatistics after = s.ledgerStatistics().orElseThrow();
            long linesAfter = recordLines(dir);
            assertThat(linesAfter - linesBefore).as("the file itself: 3 records of ours, 1 of the other scheduler")
                    .isEqualTo(4);
            assertThat(after.records() - before.records()).as("records this scheduler wrote").isEqualTo(3);
            assertThat(after.forces() - before.forces()).as("one forced append per change").isEqualTo(3);
            assertThat(after.forceNanos()).isGreaterThan(before.forceNanos());
            assertThat(after.forceNanosMax()).isPositive().isLessThanOrEqualTo(after.forceNanos());
            assertThat(after.file()).isEqualTo(s.stateDir().orElseThrow().resolve("ledger"));
            assertThat(b).isNotBlank();
        }
    }

    /** Counts record lines (not the header) by reading the file, independently of the ledger code. */
    private static long recordLines(Path dir) throws Exception {
        return Files.readAllLines(dir.resolve("ledger"), StandardCharsets.UTF_8).stream()
                .filter(l -> l.matches("^[0-9]+ [0-9a-f]+ \\{.*")).count();
    }

    @Test
    void schedulersOnOneDirectoryShareOneStateAndHearEachOther(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        List<AllocationEvent> heardByA = new CopyOnWriteArrayList<>();
        try (GpuScheduler a = open(dir, heardByA::add); GpuScheduler b = open(dir)) {
            Allocation all = a.allocate(GpuRequest.builder().count(8).build());
            GpuAllocationException e = org.assertj.core.api.Assertions.catchThrowableOfType(
                    GpuAllocationException.class, () -> b.allocate(GpuRequest.builder().build()));
            assertThat(e.reason()).isEqualTo(GpuAllocationException.Reason.INSUFFICIENT_GPUS);
            assertThat(b.allocations()).containsExactly(all);
            assertThat(b.release(all.id())).as("any process may release any id of the node").isTrue();
            a.refresh();
            assertThat(heardByA).extracting(AllocationEvent::type).containsExactly(AllocationEvent.Type.ALLOCATED,
                    AllocationEvent.Type.RELEASED);
            assertThat(a.allocations()).isEmpty();
            assertThat(a.allocate(GpuRequest.builder().count(8).build()).id()).isNotEqualTo(all.id());
        }
    }

    /** A write cut short by a crash, ending inside a two-byte UTF-8 character, is cut off with a warning. */
    @Test
    void aTornTailEndingInsideAUtf8CharacterIsCut(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        String id;
        try (GpuScheduler s = open(dir)) {
            id = s.allocate(GpuRequest.builder().owner("zoë").build()).id();
        }
        Path file = dir.resolve("ledger");
        byte[] whole = Files.readAllBytes(file);
        String text = new String(whole, StandardCharsets.UTF_8);
        String last = text.substring(text.lastIndexOf('\n', text.length() - 2) + 1);
        byte[] lastBytes = last.getBytes(StandardCharsets.UTF_8);
        int cut = last.substring(0, last.indexOf('ë')).getBytes(StandardCharsets.UTF_8).length + 1;
        Files.write(file, java.util.Arrays.copyOf(lastBytes, cut), StandardOpenOption.APPEND);
        try (GpuScheduler s = open(dir)) {
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(id);
            assertThat(s.recoveryProblems()).singleElement().asString().contains("incomplete record at offset "
                    + whole.length).contains(file.toString());
        }
        assertThat(Files.readAllBytes(file)).as("cut back to the last whole record").isEqualTo(whole);
    }

    @Test
    void aDamagedRecordInTheMiddleRefusesToOpenNamingFileAndOffset(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = open(dir)) {
            s.allocate(GpuRequest.builder().owner("abcdef").build());
            s.allocate(GpuRequest.builder().build());
        }
        Path file = dir.resolve("ledger");
        byte[] b = Files.readAllBytes(file);
        String text = new String(b, StandardCharsets.UTF_8);
        int firstRecord = text.indexOf('\n') + 1;
        int flip = text.indexOf("abcdef");
        b[flip] = 'X';
        Files.write(file, b);
        assertThatThrownBy(() -> open(dir)).isInstanceOf(LedgerException.class)
                .hasMessageContaining(file.toString()).hasMessageContaining("offset " + firstRecord)
                .hasMessageContaining("checksum")
                .satisfies(e -> assertThat(((LedgerException) e).kind()).isEqualTo(LedgerException.Kind.CORRUPT));
        assertThat(Files.readAllBytes(file)).as("a refused ledger is not touched").isEqualTo(b);
    }

    @Test
    void aLedgerOfANewerFormatIsRefusedNotMisread(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = open(dir)) {
            s.allocate(GpuRequest.builder().build());
        }
        Path file = dir.resolve("ledger");
        String text = Files.readString(file);
        Files.writeString(file, text.replaceFirst("^gpusched-ledger 1 ", "gpusched-ledger 2 "));
        assertThatThrownBy(() -> open(dir)).isInstanceOf(LedgerException.class)
                .hasMessageContaining("format 2").hasMessageContaining(file.toString())
                .satisfies(e -> assertThat(((LedgerException) e).kind()).isEqualTo(LedgerException.Kind.NEWER_FORMAT));
    }

    @Test
    void aDirectoryOrLedgerWritableByOthersIsRefused(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        open(dir).close();
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThatThrownBy(() -> open(dir)).isInstanceOf(LedgerException.class)
                .hasMessageContaining(dir.toString()).hasMessageContaining("rwxrwxrwx")
                .satisfies(e -> assertThat(((LedgerException) e).kind())
                        .isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Files.setPosixFilePermissions(dir.resolve("ledger"), PosixFilePermissions.fromString("rw-rw-r--"));
        assertThatThrownBy(() -> open(dir)).isInstanceOf(LedgerException.class)
                .hasMessageContaining(dir.resolve("ledger").toString()).hasMessageContaining("rw-rw-r--");
        Files.setPosixFilePermissions(dir.resolve("ledger"), PosixFilePermissions.fromString("rw-r--r--"));
        open(dir).close();
    }

    /** A small tmpfs fills up: the change fails with NO_SPACE and leaves memory and file as they were. */
    @Test
    void aFullDiskFailsTheChangeAndLosesNothing(@TempDir Path tmp) throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "mounting a tmpfs needs root");
        Path mnt = tmp.resolve("mnt");
        Files.createDirectories(mnt);
        Process m = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", mnt.toString())
                .redirectErrorStream(true).start();
        String out = new String(m.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(m.waitFor() == 0, "cannot mount a tmpfs here: " + out);
        try {
            Path dir = mnt.resolve("state");
            try (GpuScheduler s = open(dir)) {
                List<String> acked = new ArrayList<>();
                Path filler = mnt.resolve("filler");
                try (var os = Files.newOutputStream(filler)) {
                    byte[] block = new byte[1024];
                    while (true) {
                        os.write(block);
                        os.flush();
                    }
                } catch (java.io.IOException full) {
                    // the disk is full now
                }
                LedgerException failure = null;
                for (int i = 0; i < 10_000 && failure == null; i++) {
                    List<Allocation> before = s.allocations();
                    byte[] fileBefore = Files.readAllBytes(dir.resolve("ledger"));
                    try {
                        Allocation a = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1))
                                .label("padding", "x".repeat(200)).build());
                        acked.add(a.id());
                    } catch (LedgerException e) {
                        failure = e;
                        assertThat(s.allocations()).as("memory state as before").isEqualTo(before);
                        assertThat(Files.readAllBytes(dir.resolve("ledger"))).as("file as before")
                                .isEqualTo(fileBefore);
                    }
                }
                assertThat(failure).as("the tmpfs filled up").isNotNull();
                assertThat(failure.kind()).isEqualTo(LedgerException.Kind.NO_SPACE);
                assertThat(failure).hasMessageContaining("full").hasMessageContaining(dir.resolve("ledger").toString());
                Files.delete(filler);
                Allocation after = s.allocate(GpuRequest.builder().build());
                acked.add(after.id());
                try (GpuScheduler again = open(dir)) {
                    assertThat(again.allocations()).extracting(Allocation::id).containsExactlyElementsOf(acked);
                }
            }
        } finally {
            new ProcessBuilder("umount", mnt.toString()).start().waitFor();
        }
    }

    /** Four schedulers (own files, own identity checks) write while the ledger is compacted again and again. */
    @Test
    void compactionRacingWritersLosesNothing(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        String old = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "4096");
        List<GpuScheduler> schedulers = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            for (int i = 0; i < 4; i++) {
                schedulers.add(open(dir));
            }
            ConcurrentLinkedQueue<String> kept = new ConcurrentLinkedQueue<>();
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                GpuScheduler s = schedulers.get(t);
                fs.add(pool.submit(() -> {
                    for (int i = 0; i < 300; i++) {
                        Allocation a = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build());
                        if (i % 10 == 0) {
                            kept.add(a.id());
                        } else {
                            assertThat(s.release(a.id())).isTrue();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(5, TimeUnit.MINUTES);
            }
            String header = Files.readAllLines(dir.resolve("ledger")).get(0);
            assertThat(Long.parseLong(header.split(" ")[3])).as("compacted many times").isGreaterThan(5);
            Set<String> live = new HashSet<>();
            try (GpuScheduler fresh = open(dir)) {
                fresh.allocations().forEach(a -> live.add(a.id()));
            }
            assertThat(live).containsExactlyInAnyOrderElementsOf(kept);
            for (GpuScheduler s : schedulers) {
                assertThat(s.allocations()).extracting(Allocation::id).containsExactlyInAnyOrderElementsOf(kept);
            }
        } finally {
            pool.shutdownNow();
            schedulers.forEach(GpuScheduler::close);
            if (old == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", old);
            }
        }
    }

    /** An allocation bound to a process that is gone is reclaimed by the next change; an unbound one stays. */
    @Test
    void allocationsOfAGoneHolderAreReclaimed(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        List<AllocationEvent> events = new CopyOnWriteArrayList<>();
        Process holder = new ProcessBuilder("sleep", "600").start();
        try (GpuScheduler s = open(dir, events::add)) {
            HolderProcess h = HolderProcess.of(holder.pid());
            Allocation bound = s.allocate(GpuRequest.builder().count(2).holder(h).build());
            Allocation free = s.allocate(GpuRequest.builder().build());
            s.refresh();
            assertThat(s.allocations()).containsExactly(bound, free);
            holder.destroyForcibly();
            holder.waitFor();
            s.refresh();
            assertThat(s.allocations()).containsExactly(free);
            assertThat(events).filteredOn(e -> e.type() == AllocationEvent.Type.RECLAIMED).singleElement()
                    .satisfies(e -> {
                        assertThat(e.allocationId()).contains(bound.id());
                        assertThat(e.message()).contains("pid " + holder.pid());
                    });
        } finally {
            holder.destroyForcibly();
        }
    }

    @Test
    void theDefaultStateDirectoryFollowsTheUser() {
        assertThat(StateDirectory.userDefault(true, "/x", Path.of("/root"))).isEqualTo(Path.of("/var/lib/gpusched"));
        assertThat(StateDirectory.userDefault(false, "/home/u/.st", Path.of("/home/u")))
                .isEqualTo(Path.of("/home/u/.st/gpusched"));
        assertThat(StateDirectory.userDefault(false, null, Path.of("/home/u")))
                .isEqualTo(Path.of("/home/u/.local/state/gpusched"));
    }
}
