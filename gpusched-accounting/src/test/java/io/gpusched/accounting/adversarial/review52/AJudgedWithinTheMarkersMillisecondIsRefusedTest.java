package io.gpusched.accounting.adversarial.review52;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingFormatException;
import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.RecordCodec;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md's format: times are milliseconds; a marker's {@code judged} is written "when after {@code at}",
 * and RecordCodec refuses a {@code judged} not after {@code at}. AccountingRecord.Checkpoint compares the two at the
 * Instant's full precision, the encoder writes both truncated to milliseconds: a marker written while the clock is
 * behind the last sweep judged by less than a millisecond (a wall clock with microseconds, as Clock.systemUTC() has on
 * Linux) is written as {@code "at":X,...,"judged":X} and the store's own reader refuses that line (a warning each read,
 * and the marker, its {@code open} list and its time lost).
 */
class AJudgedWithinTheMarkersMillisecondIsRefusedTest {
    @TempDir
    Path dir;

    @Test
    void aMarkerTheCodecEncodesIsDecoded() {
        Instant t = Instant.parse("2026-03-02T10:00:30Z");
        Checkpoint c = new Checkpoint(t.plusNanos(100_000), List.of("a-1"), Optional.of(t.plusNanos(900_000)));
        assertThat(c.judged()).as("the record keeps judged: it is after at").isPresent();
        String line = RecordCodec.encode(c);
        String refused = null;
        try {
            RecordCodec.decode(line);
        } catch (AccountingFormatException e) {
            refused = e.getMessage();
        }
        assertThat(refused).as("a checkpoint marker at %s with judged %s (after at, within the same millisecond) is"
                + " encoded as %s: expected the codec to read back the line it wrote; it refused it", c.at(),
                c.judged().get(), line)
                .isNull();
    }

    @Test
    void aCheckpointOnAClockStepped800MicrosecondsBackIsReadBack() throws IOException {
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1));
        List<String> refused = new ArrayList<>();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.run(Duration.ofSeconds(10), 3);
            node.clock.advance(Duration.ofNanos(900_000));
            node.sweep(); // the last sweep judged: T0 + 30.0009 s
            node.clock.advance(Duration.ofNanos(-800_000)); // the wall clock steps back 0.8 ms
            node.sampler.checkpoint(); // a planned checkpoint (as before a stop): its marker carries judged
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(node.store.directory(), "*.log")) {
                for (Path f : ds) {
                    for (String line : Files.readAllLines(f, StandardCharsets.UTF_8)) {
                        try {
                            RecordCodec.decode(line);
                        } catch (AccountingFormatException e) {
                            refused.add(line + " (" + e.getMessage() + ")");
                        }
                    }
                }
            }
        }
        assertThat(refused).as("a sampler swept at T0 + 30.0009 s, the clock stepped back 0.8 ms, checkpoint(): "
                + "expected every line the sampler wrote to its journal ("
                + AccountingStore.DIR + ") to be read back by the store's reader; refused").isEmpty();
    }
}
