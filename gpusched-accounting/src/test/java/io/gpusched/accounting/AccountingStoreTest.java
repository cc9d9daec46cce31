package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The store's file discipline: one writer, lock-free readers, torn tails, damage, links, compaction, retention. */
class AccountingStoreTest {
    @TempDir
    Path dir;

    static Interval interval(String id, String owner, Instant from, long millis, boolean first, String end,
            int gpu, double util) {
        UsageFigures f = new UsageFigures();
        f.heldMillis = millis;
        f.measuredMillis = millis;
        f.utilizationMillis = millis;
        f.utilizationPercentMillis = util * millis;
        f.utilizationPeak = util;
        f.idleMillis = util <= 1 ? millis : 0;
        f.memoryPeakBytes = 1L << 30;
        f.energyMillijoules = 200 * millis;
        f.energyMillis = millis;
        return new Interval(id, Optional.of(owner), OptionalLong.of(1000), Optional.empty(), from,
                from.plusMillis(millis), first, Optional.ofNullable(end), false, Optional.empty(),
                List.of(new DeviceUsage(gpu, "GPU-" + gpu, f, OptionalLong.of(42), List.of())));
    }

    @Test
    void oneWriterAtATimeAndReadersNeedNoLock() {
        AccountingStore s = AccountingStore.at(dir);
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            assertThat(s.openWriter()).as("the sampler lock is held").isEmpty();
            Instant t = Instant.parse("2026-05-01T12:00:00Z");
            w.append(List.of(interval("n-1", "alice", t, 60_000, true, null, 0, 50)));
            assertThat(s.day(LocalDate.parse("2026-05-01"))).hasSize(1);
        }
        assertThat(s.openWriter()).isPresent().get().satisfies(AccountingStore.Writer::close);
    }

    /**
     * A marker's {@code judged} reads back, the latest one recovered, whatever its relation to the marker's time (a
     * stop writes its marker at the clock's time; the clock may be behind the latest sweep judged by less than a
     * millisecond: review52); a marker's own time is not one (a stop on a clock stepped ahead writes it).
     */
    @Test
    void recoveryKnowsTheLatestSweepJudgedFromTheMarkersAlone() {
        AccountingStore s = AccountingStore.at(dir);
        Instant t = Instant.parse("2026-05-01T12:00:00Z");
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(new AccountingRecord.Checkpoint(t.plusSeconds(3600), List.of())));
            assertThat(s.recover(LocalDate.parse("2026-04-01")).judged()).as("a marker's time").isEmpty();
            w.append(List.of(new AccountingRecord.Checkpoint(t, List.of(), Optional.of(t.plusSeconds(300)))));
            w.append(List.of(new AccountingRecord.Checkpoint(t.plusSeconds(60), List.of(),
                    Optional.of(t.plusSeconds(200)))));
        }
        AccountingStore.Recovered r = s.recover(LocalDate.parse("2026-04-01"));
        assertThat(r.judged()).contains(t.plusSeconds(300));
        assertThat(r.markerAt()).contains(t.plusSeconds(60));
        for (Instant judged : List.of(t.plusMillis(1), t, t.minusSeconds(5))) {
            AccountingRecord.Checkpoint c = new AccountingRecord.Checkpoint(t, List.of("a-1"), Optional.of(judged));
            String line = RecordCodec.encode(c);
            assertThat(line).endsWith(",\"judged\":" + judged.toEpochMilli() + "}");
            assertThat(RecordCodec.decode(line)).isEqualTo(c);
        }
    }

    @Test
    void filesAreReadableByEveryProcessOfTheNode() throws IOException {
        AccountingStore s = AccountingStore.at(dir);
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(interval("n-1", "alice", Instant.parse("2026-05-01T12:00:00Z"), 1000, true, null, 0,
                    5)));
        }
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(s.directory())))
                .isEqualTo("rwxr-xr-x");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(s.journal(LocalDate.parse(
                "2026-05-01"))))).isEqualTo("rw-r--r--");
    }

    @Test
    void aTornTailIsSkippedByReadersAndCutByTheNextWriter() throws IOException {
        AccountingStore s = AccountingStore.at(dir);
        Instant t = Instant.parse("2026-05-01T12:00:00Z");
        LocalDate day = LocalDate.parse("2026-05-01");
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(interval("n-1", "alice", t, 1000, true, null, 0, 5)));
        }
        String whole = RecordCodec.encode(interval("n-2", "bob", t, 1000, true, null, 1, 5));
        Files.writeString(s.journal(day), whole.substring(0, 40), StandardOpenOption.APPEND);
        assertThat(s.day(day)).hasSize(1);
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(interval("n-3", "carol", t, 1000, true, null, 2, 5)));
        }
        assertThat(s.day(day)).extracting(r -> ((Interval) r).allocationId()).containsExactly("n-1", "n-3");
        assertThat(Files.readString(s.journal(day))).doesNotContain(whole.substring(0, 40));
    }

    @Test
    void aDamagedLineLosesThatRecordOnlyAndIsNamed() throws IOException {
        AccountingStore s = AccountingStore.at(dir);
        Instant t = Instant.parse("2026-05-01T12:00:00Z");
        LocalDate day = LocalDate.parse("2026-05-01");
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(interval("n-1", "alice", t, 1000, true, null, 0, 5),
                    interval("n-2", "bob", t, 1000, true, null, 1, 5),
                    interval("n-3", "carol", t, 1000, true, null, 2, 5)));
        }
        byte[] b = Files.readAllBytes(s.journal(day));
        int second = new String(b, StandardCharsets.UTF_8).indexOf("\"n-2\"");
        b[second + 2] = '9';
        Files.write(s.journal(day), b);
        List<String> warnings = new ArrayList<>();
        List<AccountingRecord> read = new ArrayList<>();
        s.readDay(day, read::add, warnings);
        assertThat(read).extracting(r -> ((Interval) r).allocationId()).containsExactly("n-1", "n-3");
        assertThat(warnings).singleElement().satisfies(w -> assertThat(w).contains("line 2").contains("checksum"));
    }

    @Test
    void aSymlinkedStoreIsRefusedAndSymlinkedDaysAreNotRead() throws IOException, InterruptedException {
        Path elsewhere = Files.createDirectories(dir.resolve("elsewhere"));
        Path state = Files.createDirectories(dir.resolve("state"));
        Files.createSymbolicLink(state.resolve("accounting"), elsewhere);
        assertThatThrownBy(() -> AccountingStore.at(state).openWriter()).isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("symbolic link");
        AccountingStore s = AccountingStore.at(dir.resolve("s2"));
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(interval("n-1", "alice", Instant.parse("2026-05-01T12:00:00Z"), 1000, true, null, 0,
                    5)));
        }
        Path secret = Files.writeString(dir.resolve("secret"), "not a journal\n");
        Files.createSymbolicLink(s.directory().resolve("2026-05-02.log"), secret);
        List<String> warnings = new ArrayList<>();
        s.readDay(LocalDate.parse("2026-05-02"), r -> {}, warnings);
        assertThat(warnings).singleElement().satisfies(w -> assertThat(w).contains("2026-05-02.log"));
        // a FIFO in place of a day never blocks a reader (it is not opened)
        Process mkfifo = new ProcessBuilder("mkfifo", s.directory().resolve("2026-05-03.log").toString()).start();
        assertThat(mkfifo.waitFor()).isZero();
        List<String> more = new ArrayList<>();
        s.readDay(LocalDate.parse("2026-05-03"), r -> {}, more);
        assertThat(more).singleElement().satisfies(w -> assertThat(w).contains("not a regular file"));
    }

    @Test
    void compactionKeepsEveryTotalAndRetentionDeletesWholeDays() {
        AccountingStore s = AccountingStore.at(dir);
        Instant d1 = Instant.parse("2026-05-01T00:00:00Z");
        List<AccountingRecord> recs = new ArrayList<>();
        for (int i = 0; i < 24; i++) { // hourly intervals of two allocations across two days
            recs.add(interval("n-1", "alice", d1.plusSeconds(3600L * i), 3_600_000, i == 0, null, 0, 50));
            recs.add(interval("n-2", "bob", d1.plusSeconds(3600L * i), 3_600_000, i == 0, i == 23 ? "RELEASED"
                    : null, 1, 0.5));
        }
        recs.add(interval("n-1", "alice", d1.plusSeconds(86_400), 3_600_000, false, "RELEASED", 0, 10));
        Instant from = d1;
        Instant until = d1.plusSeconds(2 * 86_400);
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(recs);
            UsageReport before = UsageReport.of(s, from, until, UsageReport.GroupBy.OWNER);
            AllocationUsage n1 = AllocationUsage.find(s, "n-1").orElseThrow();
            w.compact(LocalDate.parse("2026-05-01"));
            assertThat(s.hasSummary(LocalDate.parse("2026-05-01"))).isTrue();
            assertThat(s.day(LocalDate.parse("2026-05-01"))).as("one interval per allocation").hasSize(2);
            UsageReport after = UsageReport.of(s, from, until, UsageReport.GroupBy.OWNER);
            assertThat(after.total()).isEqualTo(before.total());
            assertThat(after.rows()).extracting(UsageReport.Row::figures)
                    .containsExactlyElementsOf(before.rows().stream().map(UsageReport.Row::figures).toList());
            assertThat(after.allocations()).isEqualTo(2);
            assertThat(AllocationUsage.find(s, "n-1").orElseThrow().total()).isEqualTo(n1.total());
            assertThat(w.retain(LocalDate.parse("2026-05-02"))).containsExactly(LocalDate.parse("2026-05-01"));
            assertThat(s.days()).containsExactly(LocalDate.parse("2026-05-02"));
            assertThat(s.hasSummary(LocalDate.parse("2026-05-01"))).isFalse();
        }
    }

    @Test
    void statusShowsAnIdleAllocationFromTheStore() {
        try (ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(
                Duration.ofMinutes(1)))) {
            node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("hal").build());
            node.run(Duration.ofMinutes(1), 45);
            Map<String, IdleStatus> idle = IdleStatus.read(node.store, node.clock.instant());
            assertThat(idle).containsOnlyKeys(a.id());
            assertThat(idle.get(a.id()).describe()).isEqualTo("idle 45 min (flagged)");
        }
    }
}
