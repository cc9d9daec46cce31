package io.gpusched.accounting;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.IdleCount;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link RecordCodec#encode} writes JSON directly; the store's format is what Jackson's generator wrote. Over a
 * seeded, fuzzed set of records of every kind (texts with quotes, backslashes, every control character, non-ASCII,
 * lone surrogates, empty and over-long; figures at and past their ranges, NaN and infinities, negative zero), the two
 * encoders write the same line, byte for byte, and what decodes reads back as it did.
 */
class RecordCodecEncodingTest {
    private static final String[] PIECES = {"a", "job-7", "\"", "\\", "/", " ", "é", "ß", "€", "日本",
        "\uD83D\uDE00", "\uD800", "\uDC00", "\u007f", "\u0080", "\u00ff", "\u2028", "\uFFFF", "<", "&", "'", "null",
        "}", "]"};

    @Test
    void directEncodingIsJacksonsByteForByte() {
        Random rnd = new Random(0x5eed34cL);
        int decoded = 0;
        for (int i = 0; i < 5_000; i++) {
            int n = i;
            AccountingRecord r = record(rnd);
            String line = RecordCodec.encode(r);
            assertEquals(JacksonRecordEncoding.encode(r), line, () -> "record " + n + ": " + r);
            try {
                AccountingRecord back = RecordCodec.decode(line);
                // as a file holds it: UTF-8, where a lone surrogate became '?'
                String stored = new String(line.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8);
                assertEquals(stored, RecordCodec.encode(back), () -> "record " + n + " read back");
                decoded++;
            } catch (AccountingFormatException e) {
                // out-of-range figures the reader refuses: the encodings still had to agree
            }
        }
        assertEquals(true, decoded > 1_000, "too few fuzzed records were readable: " + decoded);
    }

    /**
     * A batch is encoded into one builder ({@code RecordCodec.encodeTo}, what the store appends): each line, after
     * lines with non-ASCII text before it, is Jackson's, its checksum over its own JSON only.
     */
    @Test
    void aBatchEncodedIntoOneBuilderIsJacksonsLineByLine() {
        Random rnd = new Random(0xba7c4L);
        StringBuilder batch = new StringBuilder("日本\n");
        List<String> expected = new ArrayList<>(List.of("日本"));
        for (int i = 0; i < 500; i++) {
            AccountingRecord r = record(rnd);
            RecordCodec.encodeTo(batch, r);
            batch.append('\n');
            expected.add(JacksonRecordEncoding.encode(r));
        }
        assertEquals(String.join("\n", expected) + "\n", batch.toString());
    }

    /**
     * The store writes a batch as {@code RecordCodec.Lines} bytes: each line, reused from batch to batch and after
     * non-ASCII text, is Jackson's line and a newline, as UTF-8 (perf39's encoder, checked here for every kind).
     */
    @Test
    void linesBytesAreJacksonsLinesInUtf8() {
        Random rnd = new Random(0x11e5L);
        RecordCodec.Lines lines = new RecordCodec.Lines(16);
        for (int batch = 0; batch < 200; batch++) {
            lines.clear();
            StringBuilder expected = new StringBuilder();
            for (int i = rnd.nextInt(40); i >= 0; i--) {
                AccountingRecord r = record(rnd);
                lines.add(r);
                expected.append(JacksonRecordEncoding.encode(r)).append('\n');
            }
            byte[] want = expected.toString().getBytes(StandardCharsets.UTF_8);
            int b = batch;
            assertEquals(new String(want, StandardCharsets.ISO_8859_1), new String(lines.bytes(), 0, lines.size(),
                    StandardCharsets.ISO_8859_1), () -> "batch " + b);
        }
    }

    @Test
    void everyCharacterBelow256AndTheSurrogatesEncodeAsJacksonDoes() {
        for (int c = 0; c < 0x10000; c++) {
            if (c > 0x100 && (c < 0xd7f0 || c > 0xe010) && c < 0xfff0) {
                continue;
            }
            String s = "x" + (char) c + "y";
            Checkpoint cp = new Checkpoint(Instant.ofEpochMilli(c), List.of(s, String.valueOf((char) c)));
            int character = c;
            assertEquals(JacksonRecordEncoding.encode(cp), RecordCodec.encode(cp), () -> "character U+"
                    + Integer.toHexString(character));
        }
    }

    static AccountingRecord record(Random rnd) {
        return switch (rnd.nextInt(4)) {
            case 0, 1 -> interval(rnd);
            case 2 -> {
                long at = time(rnd);
                yield new Checkpoint(Instant.ofEpochMilli(at), texts(rnd, rnd.nextInt(5)), rnd.nextBoolean()
                        ? Optional.empty() : Optional.of(Instant.ofEpochMilli(at + 1 + rnd.nextInt(600_000))));
            }
            default -> switch (rnd.nextInt(3)) {
                case 0 -> action(rnd);
                case 1 -> count(rnd);
                default -> summary(rnd);
            };
        };
    }

    private static IdleCount count(Random rnd) {
        return new IdleCount(Instant.ofEpochMilli(time(rnd)), text(rnd), Instant.ofEpochMilli(time(rnd)),
                Duration.ofMillis(number(rnd) & Long.MAX_VALUE), rnd.nextBoolean()
                        ? Optional.of(Duration.ofMillis(number(rnd) & Long.MAX_VALUE)) : Optional.empty());
    }

    private static Interval interval(Random rnd) {
        long from = time(rnd);
        long to = from + (rnd.nextBoolean() && from < Long.MAX_VALUE - 100_000 ? rnd.nextInt(100_000) : 0);
        List<DeviceUsage> ds = new ArrayList<>();
        for (int i = rnd.nextInt(4); i > 0; i--) {
            ds.add(new DeviceUsage(rnd.nextInt(3) == 0 ? rnd.nextInt() : rnd.nextInt(16), text(rnd),
                    figures(rnd, to - from), rnd.nextBoolean() ? OptionalLong.of(number(rnd)) : OptionalLong.empty(),
                    texts(rnd, rnd.nextInt(4))));
        }
        return new Interval(text(rnd), optionalText(rnd), rnd.nextBoolean() ? OptionalLong.of(number(rnd))
                : OptionalLong.empty(), optionalText(rnd), Instant.ofEpochMilli(from), Instant.ofEpochMilli(to),
                rnd.nextBoolean(), rnd.nextBoolean() ? Optional.of(List.of("RELEASED", "EXPIRED", "RECLAIMED",
                        "UNOBSERVED").get(rnd.nextInt(4))) : Optional.empty(),
                rnd.nextBoolean(),
                rnd.nextBoolean() ? Optional.of(Instant.ofEpochMilli(time(rnd))) : Optional.empty(), ds);
    }

    private static IdleAction action(Random rnd) {
        String detail = rnd.nextInt(8) == 0 ? "" : text(rnd);
        return new IdleAction(Instant.ofEpochMilli(time(rnd)), text(rnd), optionalText(rnd),
                IdleStep.values()[rnd.nextInt(IdleStep.values().length)], Duration.ofMillis(rnd.nextInt(1 << 30)),
                detail);
    }

    private static DaySummary summary(Random rnd) {
        boolean gpu = rnd.nextBoolean();
        List<Integer> gpus = new ArrayList<>(); // an owner row's GPUs (review53): now and then out of range
        for (int i = gpu ? 0 : rnd.nextInt(4); i > 0; i--) {
            gpus.add(rnd.nextInt(8) == 0 ? rnd.nextInt() : rnd.nextInt(16));
        }
        return new DaySummary(LocalDate.ofEpochDay(rnd.nextInt(20_000)), gpu ? Optional.empty() : optionalText(rnd),
                gpu || rnd.nextBoolean() ? OptionalLong.empty() : OptionalLong.of(number(rnd)),
                gpu ? OptionalInt.of(rnd.nextInt(64)) : OptionalInt.empty(),
                gpu && rnd.nextBoolean() ? Optional.of(text(rnd)) : Optional.empty(), rnd.nextInt(1000),
                figures(rnd, 86_400_000L), rnd.nextInt(4) == 0 ? 2 + rnd.nextInt(5) : 1, gpus,
                texts(rnd, rnd.nextInt(4)));
    }

    private static UsageFigures figures(Random rnd, long span) {
        UsageFigures f = new UsageFigures();
        f.heldMillis = rnd.nextInt(10) == 0 ? number(rnd) : span;
        f.measuredMillis = rnd.nextInt(10) == 0 ? number(rnd) : f.heldMillis / 2;
        f.utilizationMillis = f.measuredMillis / 2;
        f.utilizationPercentMillis = real(rnd) * f.utilizationMillis;
        f.utilizationPeak = rnd.nextInt(5) == 0 ? -1 : real(rnd);
        f.idleMillis = f.utilizationMillis / 3;
        f.memoryPeakBytes = rnd.nextInt(5) == 0 ? -1 : number(rnd);
        f.energyMillis = f.heldMillis;
        // within what a GPU can draw (e <= 10 kW x em): the reader takes no more (RecordCodec.plausibleEnergy)
        f.energyMillijoules = Math.min(number(rnd), f.energyMillis > Long.MAX_VALUE / UsageMeter.MAX_PLAUSIBLE_WATTS
                ? Long.MAX_VALUE : f.energyMillis * UsageMeter.MAX_PLAUSIBLE_WATTS);
        f.estimatedMillijoules = rnd.nextBoolean() ? 0 : f.energyMillijoules / 2;
        return f;
    }

    private static double real(Random rnd) {
        return switch (rnd.nextInt(12)) {
            case 0 -> Double.NaN;
            case 1 -> rnd.nextBoolean() ? Double.POSITIVE_INFINITY : Double.NEGATIVE_INFINITY;
            case 2 -> -0.0;
            case 3 -> Double.MIN_VALUE * rnd.nextInt(1000);
            case 4 -> Double.longBitsToDouble(rnd.nextLong());
            case 5 -> rnd.nextInt(101);
            case 6 -> 1e7 * rnd.nextDouble();
            case 7 -> 0.001 * rnd.nextInt(1000);
            default -> 100 * rnd.nextDouble();
        };
    }

    private static long number(Random rnd) {
        return switch (rnd.nextInt(6)) {
            case 0 -> rnd.nextLong();
            case 1 -> Long.MAX_VALUE - rnd.nextInt(3);
            case 2 -> Long.MIN_VALUE + rnd.nextInt(3);
            default -> rnd.nextInt(1 << 30);
        };
    }

    private static long time(Random rnd) {
        return rnd.nextInt(20) == 0 ? number(rnd) : 1_780_000_000_000L + rnd.nextInt(1 << 30);
    }

    private static Optional<String> optionalText(Random rnd) {
        return rnd.nextBoolean() ? Optional.of(text(rnd)) : Optional.empty();
    }

    private static List<String> texts(Random rnd, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(text(rnd));
        }
        return out;
    }

    /** A text of pieces and random characters; empty, or past the 512-character cut, now and then. */
    private static String text(Random rnd) {
        int kind = rnd.nextInt(20);
        if (kind == 0) {
            return "";
        }
        StringBuilder b = new StringBuilder();
        int len = kind == 1 ? 500 + rnd.nextInt(40) : rnd.nextInt(12);
        while (b.length() < len) {
            switch (rnd.nextInt(4)) {
                case 0 -> b.append((char) rnd.nextInt(0x20));
                case 1 -> b.append((char) rnd.nextInt(0x10000));
                default -> b.append(PIECES[rnd.nextInt(PIECES.length)]);
            }
        }
        return b.toString();
    }
}
