package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.ReportTimes;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Attacks on the accounting store, the report's times and its views that the product withstands. */
@Tag("adversarial")
class AccountingAttacksTest {
    @TempDir
    Path dir;

    private static final Instant NOW = Instant.parse("2026-03-02T10:00:00Z");

    @Test
    void reportTimesRefuseHostileTextNamingIt() {
        for (String bad : List.of("2026-02-30", "2026-13-01", "7d\n", "\uff17d", "-1d", "9999999d", "7 d", "",
                "2026-01-31T25:00:00Z", "2026-01-31T08:00:00+01:00", "\u001b[31m7d", "1e3s", "P7D")) {
            assertThatThrownBy(() -> ReportTimes.parse("--since", bad, NOW)).as(bad)
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("--since")
                    .hasMessageContaining("2026-01-31").hasMessageNotContaining("\u001b").hasMessageNotContaining("\n");
        }
        // the longest duration accepted (100 years; longer ones are refused naming the bound)
        assertThat(ReportTimes.parse("--since", "36500d", NOW)).isBefore(NOW);
        assertThat(ReportTimes.parse("--since", "2026-01-31T08:00Z", NOW))
                .isEqualTo(Instant.parse("2026-01-31T08:00:00Z"));
        assertThat(ReportTimes.parse("--since", "2026-01-31", NOW)).isEqualTo(Instant.parse("2026-01-31T00:00:00Z"));
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aFifoASymlinkAndGarbageInTheStoreAreSkippedWithWarningsNeverFollowedOrBlockedOn() throws Exception {
        Path acc = Files.createDirectories(dir.resolve(AccountingStore.DIR));
        Path secret = Files.writeString(dir.resolve("secret"), "root:x:0:0\n");
        Files.createSymbolicLink(acc.resolve("2026-03-01.log"), secret);
        Process p = new ProcessBuilder("mkfifo", acc.resolve("2026-03-02.log").toString()).start();
        assertThat(p.waitFor()).isZero();
        Files.write(acc.resolve("2026-02-28.log"), ("00000000 {\"k\":\"i\"}\n\u0000\u0000garbage\n"
                + "{not json\n" + "x".repeat(3_000_000) + "\n").getBytes(StandardCharsets.UTF_8));
        AccountingStore store = AccountingStore.at(dir);
        UsageReport r = UsageReport.of(store, Instant.parse("2026-02-27T00:00:00Z"),
                Instant.parse("2026-03-03T00:00:00Z"), UsageReport.GroupBy.OWNER);
        assertThat(r.rows()).isEmpty();
        assertThat(r.warnings()).anyMatch(w -> w.contains("2026-03-01.log") && w.contains("not a regular file"))
                .anyMatch(w -> w.contains("2026-03-02.log")).anyMatch(w -> w.contains("2026-02-28.log"));
        assertThat(String.join("\n", r.warnings())).doesNotContain("root:x");
        assertThat(ReportViews.text(r)).doesNotContain("\u0000");
    }

    @Test
    void aStoreDirectoryThatIsASymbolicLinkIsRefusedForWriting() throws Exception {
        Path elsewhere = Files.createDirectories(dir.resolve("elsewhere"));
        Path state = Files.createDirectories(dir.resolve("state"));
        Files.createSymbolicLink(state.resolve(AccountingStore.DIR), elsewhere);
        assertThatThrownBy(() -> AccountingStore.at(state).openWriter()).isInstanceOf(UncheckedIOException.class)
                .hasMessageContaining("symbolic link");
        assertThat(elsewhere).isEmptyDirectory();
    }

    @Test
    void aTornTailAfterAKillIsSkippedByReaders() throws Exception {
        Allocation a;
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.sweep();
            a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 3);
            node.scheduler.release(a.id());
        }
        Path journal = AccountingStore.at(dir).directory().resolve(LocalDate.ofInstant(AccountingNode.T0,
                ZoneOffset.UTC) + ".log");
        long before = AllocationUsage.find(AccountingStore.at(dir), a.id()).orElseThrow().total().heldMillis();
        Files.writeString(journal, "deadbeef {\"k\":\"i\",\"id\":\"" + a.id() + "\",\"from\":1,\"to\":99999999999",
                StandardOpenOption.APPEND);
        assertThat(AllocationUsage.find(AccountingStore.at(dir), a.id()).orElseThrow().total().heldMillis())
                .isEqualTo(before);
        List<String> warnings = new ArrayList<>();
        AccountingStore.at(dir).readDay(LocalDate.ofInstant(AccountingNode.T0, ZoneOffset.UTC), r -> {}, warnings);
        assertThat(warnings).as("a last line without its newline is a write in progress, skipped quietly").isEmpty();
    }

    @Test
    void csvNeutralisesFormulasInOwnerNames() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0)
                    .owner("=HYPERLINK(\"http://x\",\"a,b\")").build());
            node.run(Duration.ofMinutes(1), 2);
            node.scheduler.release(a.id());
            String csv = ReportViews.csv(UsageReport.of(node.store, AccountingNode.T0, node.clock.instant(),
                    UsageReport.GroupBy.OWNER));
            String row = csv.lines().skip(1).findFirst().orElseThrow();
            assertThat(row).startsWith("\"'=HYPERLINK(\"\"http://x\"\",\"\"a,b\"\")\",");
            assertThat(csv.lines().count()).isEqualTo(3);
        }
    }
}
