package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.accounting.AccountingRecord.IdleCount;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.List;
import java.util.Optional;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The idle policy's count record ({@code k: p}): its line, what a reader refuses, and compaction dropping it. */
class IdleCountRecordTest {
    @TempDir
    Path dir;

    private static final Instant AT = Instant.parse("2026-05-01T10:00:00Z");

    private static String line(String json) {
        CRC32C crc = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        crc.update(b, 0, b.length);
        return String.format("%08x", crc.getValue()) + " " + json;
    }

    @Test
    void itsLineIsDocumentedAndReadsBack() {
        IdleCount warned = new IdleCount(AT, "a-1", AT.minusSeconds(900), Duration.ofSeconds(840),
                Optional.of(Duration.ofSeconds(120)));
        String json = "{\"k\":\"p\",\"at\":" + AT.toEpochMilli() + ",\"id\":\"a-1\",\"start\":"
                + AT.minusSeconds(900).toEpochMilli() + ",\"idle\":840000,\"warned\":120000}";
        assertThat(RecordCodec.encode(warned)).isEqualTo(line(json));
        assertThat(RecordCodec.decode(line(json))).isEqualTo(warned);
        IdleCount notWarned = new IdleCount(AT, "a-2", AT, Duration.ZERO, Optional.empty());
        assertThat(RecordCodec.decode(RecordCodec.encode(notWarned))).isEqualTo(notWarned);
    }

    @Test
    void aReaderRefusesAForgedCountNamingTheField() {
        String base = "{\"k\":\"p\",\"at\":" + AT.toEpochMilli() + ",\"id\":\"a-1\",\"start\":1";
        assertThatThrownBy(() -> RecordCodec.decode(line(base + ",\"idle\":-5}")))
                .isInstanceOf(AccountingFormatException.class).hasMessageContaining("idle");
        assertThatThrownBy(() -> RecordCodec.decode(line(base + "}")))
                .isInstanceOf(AccountingFormatException.class).hasMessageContaining("idle");
        assertThatThrownBy(() -> RecordCodec.decode(line(base + ",\"idle\":5,\"warned\":1.5}")))
                .isInstanceOf(AccountingFormatException.class).hasMessageContaining("warned");
        assertThatThrownBy(() -> RecordCodec.decode(line(base + ",\"idle\":5,\"uid\":0}")))
                .isInstanceOf(AccountingFormatException.class).hasMessageContaining("uid");
        assertThatThrownBy(() -> RecordCodec.decode(line("{\"k\":\"p\",\"id\":\"a-1\",\"start\":1,\"idle\":5}")))
                .isInstanceOf(AccountingFormatException.class).hasMessageContaining("at");
    }

    @Test
    void compactionDropsCountsAndKeepsTheRest() {
        AccountingStore s = AccountingStore.at(dir);
        Instant d1 = Instant.parse("2026-05-01T00:00:00Z");
        try (AccountingStore.Writer w = s.openWriter().orElseThrow()) {
            w.append(List.of(AccountingStoreTest.interval("n-1", "alice", d1, 3_600_000, true, null, 0, 0.5),
                    new IdleCount(d1.plusSeconds(3600), "n-1", d1, Duration.ofHours(1), Optional.empty()),
                    AccountingStoreTest.interval("n-1", "alice", d1.plusSeconds(3600), 3_600_000, false,
                            "RELEASED", 0, 0.5)));
            assertThat(s.day(LocalDate.parse("2026-05-01"))).hasAtLeastOneElementOfType(IdleCount.class);
            w.compact(LocalDate.parse("2026-05-01"));
            assertThat(s.day(LocalDate.parse("2026-05-01"))).hasSize(1)
                    .noneMatch(r -> r instanceof IdleCount);
        }
    }
}
