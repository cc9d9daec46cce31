package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Idle times in audits, notices and status read the same whatever the JVM's locale (review38 noticed "2,5 h"). */
class IdleDurationTextTest {

    @Test
    void hoursUseAPointUnderAnyLocale() {
        Locale was = Locale.getDefault();
        try {
            Locale.setDefault(Locale.GERMANY);
            assertThat(IdleWatch.human(Duration.ofMinutes(150))).isEqualTo("2.5 h");
            assertThat(IdleWatch.human(Duration.ofMinutes(42))).isEqualTo("42 min");
            assertThat(IdleWatch.human(Duration.ofSeconds(50))).isEqualTo("50 s");
        } finally {
            Locale.setDefault(was);
        }
    }

    @Test
    void reportsAndVerdictsUseAPointUnderAnyLocale(@TempDir Path dir) {
        Locale was = Locale.getDefault();
        try {
            Locale.setDefault(Locale.GERMANY);
            AccountingStore s = AccountingStore.at(dir);
            Instant from = Instant.parse("2026-05-01T00:00:00Z");
            try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
                w.append(List.of(AccountingStoreTest.interval("n-1", "alice", from, 5_400_000, true, "RELEASED", 0,
                        37.5)));
            }
            UsageReport r = UsageReport.of(s, from, from.plusSeconds(86_400), UsageReport.GroupBy.OWNER);
            String text = ReportViews.text(r);
            assertThat(text).as(text).contains("1.50").contains("37.5 %").doesNotContain("1,50").doesNotContain("37,5");
            String verdict = AllocationUsage.find(s, "n-1").orElseThrow().verdict();
            assertThat(verdict).contains("1.50 GPU-hours").contains("1.0 GiB").doesNotContain(",50");
        } finally {
            Locale.setDefault(was);
        }
    }
}
