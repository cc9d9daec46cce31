package io.gpusched.accounting;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingRecord.IdleCount;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;
import java.util.zip.CRC32C;

/**
 * The accounting store's line format: {@code <crc32c> <json>}, the CRC-32C of the JSON's UTF-8 bytes as eight
 * lowercase hex digits, one space, and one JSON object on one line. Times are milliseconds since the epoch (UTC);
 * figures are milliseconds, percent times milliseconds, bytes and millijoules. docs/ACCOUNTING.md documents every key.
 *
 * <p>{@link #decode} is the parser of a file any process of the node reads: for any text it returns a record or throws
 * {@link AccountingFormatException} naming what is wrong, never another exception; values out of range (negative
 * times, a utilization over 100 %, an interval ending before it starts, more measured time than held) are refused as
 * well as malformed ones, and so is a line over {@link #MAX_LINE_BYTES}.
 */
public final class RecordCodec {
    /** Longest line, in bytes (a 1,024-GPU allocation with notes fits). */
    public static final int MAX_LINE_BYTES = 1 << 20;
    /** Most notes per device. */
    public static final int MAX_NOTES = 8;
    /** Most devices per interval. */
    public static final int MAX_DEVICES = 1024;
    /** Most ids in a checkpoint marker. */
    public static final int MAX_OPEN = 100_000;
    /** Longest id, owner, job, UUID, note or detail, in characters. */
    public static final int MAX_TEXT = 512;
    /** Latest time accepted: 9999-12-31. */
    static final long MAX_EPOCH_MILLIS = 253_402_300_799_999L;

    private static final JsonFactory FACTORY = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(8).maxNumberLength(40)
                    .maxStringLength(MAX_LINE_BYTES).build())
            .build();
    private static final ObjectMapper MAPPER = new ObjectMapper(FACTORY);
    private static final Set<String> INTERVAL_KEYS = Set.of("k", "id", "owner", "uid", "job", "from", "to", "first",
            "end", "gap", "idle", "gpus");
    private static final Set<String> DEVICE_KEYS = Set.of("i", "uuid", "held", "meas", "um", "us", "up", "idle", "mp",
            "e", "ee", "em", "ec", "notes");
    private static final Set<String> SUMMARY_KEYS = Set.of("k", "day", "owner", "uid", "i", "uuid", "n", "held",
            "meas", "um", "us", "up", "idle", "mp", "e", "ee", "em", "parts", "gpus", "notes");
    /** the most parts a summary row may sum ({@code parts}) */
    static final int MAX_PARTS = 1 << 24;
    private static final Set<String> ENDS = Set.of("RELEASED", "EXPIRED", "RECLAIMED", "UNOBSERVED", "GONE");

    private RecordCodec() {
    }

    // ------------------------------------------------------------------------------------------------- encoding

    /**
     * @return the record as one line, without the newline: the bytes Jackson's generator wrote with this factory's
     *         defaults (JSON written directly, no generator, writer or buffer recycler per record: a checkpoint
     *         encodes every open interval; {@code RecordCodecEncodingTest} checks it byte for byte against Jackson)
     */
    public static String encode(AccountingRecord r) {
        StringBuilder j = new StringBuilder(r instanceof Interval i ? 160 + 320 * i.devices().size() : 128);
        encodeTo(j, r);
        return j.toString();
    }

    /**
     * Appends the record's line ({@link #encode}, without the newline) to {@code out}: a batch of records is encoded
     * into one builder, with no string per record.
     */
    static void encodeTo(StringBuilder out, AccountingRecord r) {
        int at = out.length();
        out.append("00000000 "); // the checksum's place, filled in below
        json(out, r);
        checksum(out, at);
    }

    /**
     * A batch's lines ({@link #encode} and a newline each) as UTF-8 bytes in one array, written by the store as they
     * are: each record's JSON is written into one builder, turned into bytes in place and summed there, with no string,
     * array or checksum object per record or per batch (a checkpoint encodes every open allocation's interval; the
     * bytes are the ones {@code encode(r) + "\n"} gives, for any text). Reused from batch to batch; not thread-safe.
     */
    static final class Lines {
        private final StringBuilder text = new StringBuilder(512);
        private final CRC32C crc = new CRC32C();
        private byte[] bytes;
        private int size;

        Lines(int capacity) {
            bytes = new byte[Math.max(64, capacity)];
        }

        /** Empties it (the array stays). */
        void clear() {
            size = 0;
        }

        /** @return the array holding the lines: its first {@link #size()} bytes */
        byte[] bytes() {
            return bytes;
        }

        /** @return how many bytes the lines take */
        int size() {
            return size;
        }

        /** Appends a record's line and its newline. */
        void add(AccountingRecord r) {
            text.setLength(0);
            json(text, r);
            int n = text.length();
            int at = size;
            int from = at + 9;
            room(from + n + 1);
            byte[] b = bytes;
            int len = n;
            for (int i = 0; i < n; i++) {
                char c = text.charAt(i);
                if (c >= 0x80) { // not ASCII: the JSON's UTF-8 bytes as String.getBytes gives them
                    byte[] utf8 = text.toString().getBytes(StandardCharsets.UTF_8);
                    len = utf8.length;
                    room(from + len + 1);
                    b = bytes;
                    System.arraycopy(utf8, 0, b, from, len);
                    break;
                }
                b[from + i] = (byte) c;
            }
            crc.reset();
            crc.update(b, from, len);
            int v = (int) crc.getValue();
            for (int i = at + 7; i >= at; i--) {
                b[i] = HEX_LOWER[v & 0xf];
                v >>>= 4;
            }
            b[at + 8] = ' ';
            b[from + len] = '\n';
            size = from + len + 1;
        }

        private void room(int needed) {
            if (needed > bytes.length) {
                bytes = Arrays.copyOf(bytes, Math.max(needed, bytes.length * 2));
            }
        }
    }

    private static final byte[] HEX_LOWER = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

    /** Appends the record's JSON object (the line without its checksum and space). */
    private static void json(StringBuilder out, AccountingRecord r) {
        if (r instanceof Interval i) {
            interval(out, i);
        } else if (r instanceof Checkpoint c) {
            out.append("{\"k\":\"c\",\"at\":").append(c.at().toEpochMilli()).append(",\"open\":[");
            boolean firstId = true;
            for (String id : c.open()) {
                if (!firstId) {
                    out.append(',');
                }
                firstId = false;
                quoted(out, clip(id));
            }
            out.append(']');
            if (c.judged().isPresent()) {
                out.append(",\"judged\":").append(c.judged().get().toEpochMilli());
            }
        } else if (r instanceof IdleAction a) {
            out.append("{\"k\":\"a\",\"at\":").append(a.at().toEpochMilli()).append(",\"id\":");
            quoted(out, clip(a.allocationId()));
            if (a.owner().isPresent()) {
                out.append(",\"owner\":");
                quoted(out, clip(a.owner().get()));
            }
            out.append(",\"action\":");
            quoted(out, a.action().name());
            out.append(",\"idleFor\":").append(a.idleFor().toMillis()).append(",\"detail\":");
            quoted(out, a.detail().length() > MAX_TEXT ? a.detail().substring(0, MAX_TEXT) : a.detail());
        } else if (r instanceof IdleCount c) {
            out.append("{\"k\":\"p\",\"at\":").append(c.at().toEpochMilli()).append(",\"id\":");
            quoted(out, clip(c.allocationId()));
            out.append(",\"start\":").append(c.start().toEpochMilli()).append(",\"idle\":")
                    .append(c.idle().toMillis());
            if (c.sinceWarning().isPresent()) {
                out.append(",\"warned\":").append(c.sinceWarning().get().toMillis());
            }
        } else if (r instanceof DaySummary s) {
            out.append("{\"k\":\"d\",\"day\":");
            quoted(out, s.day().toString());
            writeOwner(out, s.owner(), s.ownerUid());
            if (s.index().isPresent()) {
                out.append(",\"i\":").append(s.index().getAsInt()).append(",\"uuid\":");
                quoted(out, clip(s.uuid().orElse("-")));
            }
            out.append(",\"n\":").append(s.allocations());
            if (s.parts() > 1) {
                out.append(",\"parts\":").append(Math.min(s.parts(), MAX_PARTS));
            }
            writeFigures(out, s.figures());
            if (!s.gpus().isEmpty()) {
                out.append(",\"gpus\":[");
                for (int g = 0; g < s.gpus().size(); g++) {
                    if (g > 0) {
                        out.append(',');
                    }
                    out.append(s.gpus().get(g).intValue());
                }
                out.append(']');
            }
            writeNotes(out, s.notes());
        } else {
            out.append('{');
        }
        out.append('}');
    }

    /** Appends an interval's JSON object without its closing brace. */
    private static void interval(StringBuilder j, Interval i) {
        j.append("{\"k\":\"i\",\"id\":");
        quoted(j, clip(i.allocationId()));
        writeOwner(j, i.owner(), i.ownerUid());
        if (i.jobId().isPresent()) {
            j.append(",\"job\":");
            quoted(j, clip(i.jobId().get()));
        }
        j.append(",\"from\":").append(i.from().toEpochMilli()).append(",\"to\":").append(i.to().toEpochMilli());
        if (i.first()) {
            j.append(",\"first\":true");
        }
        if (i.end().isPresent()) {
            j.append(",\"end\":");
            quoted(j, i.end().get());
        }
        if (i.gap()) {
            j.append(",\"gap\":true");
        }
        if (i.idleSince().isPresent()) {
            j.append(",\"idle\":").append(i.idleSince().get().toEpochMilli());
        }
        j.append(",\"gpus\":[");
        boolean firstDevice = true;
        for (DeviceUsage d : i.devices()) {
            j.append(firstDevice ? "{\"i\":" : ",{\"i\":").append(d.index()).append(",\"uuid\":");
            firstDevice = false;
            quoted(j, clip(d.uuid()));
            writeFigures(j, d.figures());
            if (d.counterAtEnd().isPresent()) {
                j.append(",\"ec\":").append(d.counterAtEnd().getAsLong());
            }
            writeNotes(j, d.notes());
            j.append('}');
        }
        j.append(']');
    }

    /** Appends {@code ,"notes":[...]} where there are notes (a device's, a summary row's). */
    private static void writeNotes(StringBuilder j, List<String> notes) {
        if (!notes.isEmpty()) {
            j.append(",\"notes\":[");
            for (int n = 0; n < notes.size(); n++) {
                if (n > 0) {
                    j.append(',');
                }
                quoted(j, clip(notes.get(n)));
            }
            j.append(']');
        }
    }

    /**
     * Writes the CRC-32C of the line's JSON (its UTF-8 bytes, from {@code at + 9} to the end) over the eight
     * placeholder digits at {@code at}.
     */
    private static void checksum(StringBuilder j, int at) {
        byte[] json = j.substring(at + 9).getBytes(StandardCharsets.UTF_8);
        CRC32C c = new CRC32C();
        c.update(json, 0, json.length);
        int v = (int) c.getValue();
        for (int i = at + 7; i >= at; i--) {
            j.setCharAt(i, Character.forDigit(v & 0xf, 16));
            v >>>= 4;
        }
    }

    /**
     * Appends {@code value} as Jackson writes a double: {@link Double#toString}, and NaN or an infinity as a quoted
     * string (its default {@code QUOTE_NON_NUMERIC_NUMBERS}; the reader refuses both).
     */
    private static void number(StringBuilder j, double value) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            j.append('"').append(value).append('"');
        } else {
            j.append(value);
        }
    }

    private static final char[] HEX_UPPER = "0123456789ABCDEF".toCharArray();

    /**
     * Appends a JSON string as Jackson's generator escapes it by default: a quote and a backslash after a backslash,
     * the control characters below U+0020 as a backslash and one of {@code b t n f r}, or else as a backslash, a
     * {@code u} and four uppercase hex digits; every other character (non-ASCII, lone surrogates) as it is.
     */
    private static void quoted(StringBuilder j, String s) {
        j.append('"');
        int n = s.length();
        int plain = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c >= 0x20 && c != '"' && c != '\\') {
                continue;
            }
            j.append(s, plain, i);
            plain = i + 1;
            j.append('\\');
            switch (c) {
                case '"' -> j.append('"');
                case '\\' -> j.append('\\');
                case '\b' -> j.append('b');
                case '\t' -> j.append('t');
                case '\n' -> j.append('n');
                case '\f' -> j.append('f');
                case '\r' -> j.append('r');
                default -> j.append("u00").append(HEX_UPPER[c >> 4]).append(HEX_UPPER[c & 0xf]);
            }
        }
        j.append(s, plain, n).append('"');
    }

    private static void writeOwner(StringBuilder j, Optional<String> owner, OptionalLong uid) {
        if (owner.isPresent()) {
            j.append(",\"owner\":");
            quoted(j, clip(owner.get()));
        }
        if (uid.isPresent()) {
            j.append(",\"uid\":").append(uid.getAsLong());
        }
    }

    private static void writeFigures(StringBuilder j, UsageFigures f) {
        j.append(",\"held\":").append(f.heldMillis).append(",\"meas\":").append(f.measuredMillis)
                .append(",\"um\":").append(f.utilizationMillis).append(",\"us\":");
        number(j, f.utilizationPercentMillis);
        if (f.utilizationPeak >= 0) {
            j.append(",\"up\":");
            number(j, f.utilizationPeak);
        }
        j.append(",\"idle\":").append(f.idleMillis);
        if (f.memoryPeakBytes >= 0) {
            j.append(",\"mp\":").append(f.memoryPeakBytes);
        }
        j.append(",\"e\":").append(f.energyMillijoules).append(",\"ee\":").append(f.estimatedMillijoules)
                .append(",\"em\":").append(f.energyMillis);
    }

    /** @return a text the reader accepts: cut to {@link #MAX_TEXT} characters, never empty */
    /**
     * @return how a record's line writes the key {@code key} with the text value {@code value} ({@code "job":"x"}):
     *         a reader may skip lines that do not hold it before decoding them
     */
    static String keyed(String key, String value) {
        StringBuilder b = new StringBuilder();
        quoted(b, key);
        b.append(':');
        quoted(b, clip(value));
        return b.toString();
    }

    private static String clip(String s) {
        if (s.isEmpty()) {
            return "-";
        }
        return s.length() > MAX_TEXT ? s.substring(0, MAX_TEXT) : s;
    }

    static int crc(byte[] b) {
        CRC32C c = new CRC32C();
        c.update(b, 0, b.length);
        return (int) c.getValue();
    }

    // ------------------------------------------------------------------------------------------------- decoding

    /**
     * @param line one line without its newline
     * @return the record
     * @throws AccountingFormatException naming what is wrong; nothing else for any input
     */
    public static AccountingRecord decode(String line) {
        if (line.length() > MAX_LINE_BYTES) {
            throw new AccountingFormatException("line of " + line.length() + " characters; at most "
                    + MAX_LINE_BYTES);
        }
        if (line.length() < 11 || line.charAt(8) != ' ') {
            throw new AccountingFormatException("not \"<crc32c> <json>\": expected 8 hex digits, a space and a JSON"
                    + " object");
        }
        int crc = 0;
        for (int i = 0; i < 8; i++) {
            int v = Character.digit(line.charAt(i), 16);
            if (v < 0 || Character.isUpperCase(line.charAt(i))) {
                throw new AccountingFormatException("checksum \"" + printable(line.substring(0, 8)) + "\" is not 8"
                        + " lowercase hex digits");
            }
            crc = crc << 4 | v;
        }
        String json = line.substring(9);
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        if (crc(bytes) != crc) {
            throw new AccountingFormatException("checksum mismatch: the line says " + line.substring(0, 8)
                    + ", its JSON sums to " + String.format("%08x", crc(bytes)) + " (a damaged record)");
        }
        JsonNode n;
        try {
            n = MAPPER.readTree(bytes);
        } catch (JsonProcessingException e) {
            throw new AccountingFormatException("not JSON: " + e.getOriginalMessage());
        } catch (IOException | RuntimeException e) {
            throw new AccountingFormatException("not JSON: " + e);
        }
        if (n == null || !n.isObject()) {
            throw new AccountingFormatException("expected a JSON object");
        }
        String k = text(n, "k", true).orElseThrow();
        return switch (k) {
            case "i" -> interval(n);
            case "c" -> checkpoint(n);
            case "a" -> action(n);
            case "d" -> summary(n);
            case "p" -> count(n);
            default -> throw new AccountingFormatException("k: \"" + printable(k) + "\" is not a record kind; valid:"
                    + " i (interval), c (checkpoint), a (idle action), p (idle policy's count), d (day summary)");
        };
    }

    private static Interval interval(JsonNode n) {
        only(n, INTERVAL_KEYS, "interval");
        String id = text(n, "id", true).orElseThrow();
        long from = time(n, "from");
        long to = time(n, "to");
        if (to < from) {
            throw new AccountingFormatException("to (" + to + ") is before from (" + from + ")");
        }
        Optional<String> end = text(n, "end", false);
        if (end.isPresent() && !ENDS.contains(end.get())) {
            throw new AccountingFormatException("end: \"" + printable(end.get()) + "\"; valid: " + ENDS);
        }
        Optional<Instant> idle = n.has("idle") ? Optional.of(Instant.ofEpochMilli(time(n, "idle")))
                : Optional.empty();
        JsonNode gpus = n.get("gpus");
        if (gpus == null || !gpus.isArray() || gpus.size() > MAX_DEVICES) {
            throw new AccountingFormatException("gpus: expected a list of at most " + MAX_DEVICES + " devices");
        }
        List<DeviceUsage> devices = new ArrayList<>();
        for (JsonNode d : gpus) {
            if (!d.isObject()) {
                throw new AccountingFormatException("gpus: each device is a JSON object");
            }
            only(d, DEVICE_KEYS, "device");
            UsageFigures f = figures(d);
            if (f.heldMillis > to - from) {
                throw new AccountingFormatException("held: " + f.heldMillis + " ms in an interval of " + (to - from)
                        + " ms");
            }
            List<String> notes = notes(d);
            if (!plausibleEnergy(f)) { // the rest of the record stands: its time, its figures, its grant and release
                if (notes.size() < MAX_NOTES) {
                    notes.add(ENERGY_REFUSED + " (" + f.energyMillijoules + " mJ over " + f.energyMillis + " ms)");
                }
                f.energyMillijoules = 0;
                f.estimatedMillijoules = 0;
                f.energyMillis = 0;
            }
            devices.add(new DeviceUsage(integer(d, "i", 0, 1 << 20), text(d, "uuid", true).orElseThrow(), f,
                    n(d, "ec"), notes));
        }
        return new Interval(id, text(n, "owner", false), n(n, "uid"), text(n, "job", false),
                Instant.ofEpochMilli(from), Instant.ofEpochMilli(to), bool(n, "first"), end, bool(n, "gap"), idle,
                devices);
    }

    /** @return the record's {@code notes} (empty when absent): a list of at most {@link #MAX_NOTES} texts */
    private static List<String> notes(JsonNode n) {
        List<String> notes = new ArrayList<>();
        JsonNode ns = n.get("notes");
        if (ns != null) {
            if (!ns.isArray() || ns.size() > MAX_NOTES) {
                throw new AccountingFormatException("notes: expected a list of at most " + MAX_NOTES + " texts");
            }
            for (JsonNode x : ns) {
                if (!x.isTextual() || x.textValue().length() > MAX_TEXT) {
                    throw new AccountingFormatException("notes: each note is a text of at most " + MAX_TEXT
                            + " characters");
                }
                notes.add(x.textValue());
            }
        }
        return notes;
    }

    /**
     * @return a summary owner row's {@code gpus} (empty when absent): at most {@link #MAX_DEVICES} device indices,
     *         each as an interval's device {@code i}
     */
    private static List<Integer> indices(JsonNode n) {
        List<Integer> gpus = new ArrayList<>();
        JsonNode gs = n.get("gpus");
        if (gs != null) {
            if (!gs.isArray() || gs.size() > MAX_DEVICES) {
                throw new AccountingFormatException("gpus: expected a list of at most " + MAX_DEVICES
                        + " GPU indices");
            }
            for (JsonNode x : gs) {
                if (!x.isIntegralNumber() || !x.canConvertToInt() || x.intValue() < 0 || x.intValue() > 1 << 20) {
                    throw new AccountingFormatException("gpus: each GPU index is a whole number from 0 to "
                            + (1 << 20));
                }
                gpus.add(x.intValue());
            }
        }
        return gpus;
    }

    private static Checkpoint checkpoint(JsonNode n) {
        only(n, Set.of("k", "at", "open", "judged"), "checkpoint");
        JsonNode open = n.get("open");
        if (open == null || !open.isArray() || open.size() > MAX_OPEN) {
            throw new AccountingFormatException("open: expected a list of at most " + MAX_OPEN + " allocation ids");
        }
        List<String> ids = new ArrayList<>();
        for (JsonNode x : open) {
            if (!x.isTextual() || x.textValue().isEmpty() || x.textValue().length() > MAX_TEXT) {
                throw new AccountingFormatException("open: each id is a text of 1 to " + MAX_TEXT + " characters");
            }
            ids.add(x.textValue());
        }
        Optional<Instant> judged = n.has("judged") ? Optional.of(Instant.ofEpochMilli(time(n, "judged")))
                : Optional.empty();
        return new Checkpoint(Instant.ofEpochMilli(time(n, "at")), ids, judged);
    }

    private static IdleAction action(JsonNode n) {
        only(n, Set.of("k", "at", "id", "owner", "action", "idleFor", "detail"), "idle action");
        String a = text(n, "action", true).orElseThrow();
        IdleStep step;
        try {
            step = IdleStep.valueOf(a);
        } catch (IllegalArgumentException e) {
            throw new AccountingFormatException("action: \"" + printable(a) + "\"; valid: "
                    + List.of(IdleStep.values()));
        }
        return new IdleAction(Instant.ofEpochMilli(time(n, "at")), text(n, "id", true).orElseThrow(),
                text(n, "owner", false), step, Duration.ofMillis(nonNegative(n, "idleFor", true)), detail(n));
    }

    private static IdleCount count(JsonNode n) {
        only(n, Set.of("k", "at", "id", "start", "idle", "warned"), "idle count");
        return new IdleCount(Instant.ofEpochMilli(time(n, "at")), text(n, "id", true).orElseThrow(),
                Instant.ofEpochMilli(time(n, "start")), Duration.ofMillis(nonNegative(n, "idle", true)),
                n.has("warned") ? Optional.of(Duration.ofMillis(nonNegative(n, "warned", true))) : Optional.empty());
    }

    private static DaySummary summary(JsonNode n) {
        only(n, SUMMARY_KEYS, "day summary");
        String day = text(n, "day", true).orElseThrow();
        LocalDate d;
        try {
            if (!day.matches("[0-9]{4}-[0-9]{2}-[0-9]{2}")) {
                throw new DateTimeException(day);
            }
            d = LocalDate.parse(day);
        } catch (DateTimeException e) {
            throw new AccountingFormatException("day: \"" + printable(day) + "\" is not a date such as 2026-01-31");
        }
        UsageFigures f = figures(n);
        int parts = n.has("parts") ? integer(n, "parts", 1, MAX_PARTS) : 1;
        List<String> notes = notes(n);
        if (!plausibleEnergy(f, parts)) { // a summary of records read plausible: forged; its energy is not taken
            if (notes.size() < MAX_NOTES) { // and said, as for an interval's device (review55)
                notes.add(ENERGY_REFUSED + " (" + f.energyMillijoules + " mJ over " + f.energyMillis + " ms)");
            }
            f.energyMillijoules = 0;
            f.estimatedMillijoules = 0;
            f.energyMillis = 0;
        }
        if (f.heldMillis > Duration.ofDays(1).toMillis() * MAX_DEVICES) {
            throw new AccountingFormatException("held: " + f.heldMillis + " ms is more than a day");
        }
        if (n.has("i")) { // a GPU row
            if (n.has("owner") || n.has("uid") || n.has("gpus")) {
                throw new AccountingFormatException("a GPU row (i) has no owner, uid or gpus");
            }
            return new DaySummary(d, Optional.empty(), OptionalLong.empty(), OptionalInt.of(integer(n, "i", 0,
                    1 << 20)), text(n, "uuid", true), nonNegative(n, "n", true), f, parts, List.of(), notes);
        }
        if (n.has("uuid")) {
            throw new AccountingFormatException("uuid without i: an owner row names no GPU");
        }
        return new DaySummary(d, text(n, "owner", false), n(n, "uid"), OptionalInt.empty(), Optional.empty(),
                nonNegative(n, "n", true), f, parts, indices(n), notes);
    }

    /** The note on a device whose recorded energy was refused when read. */
    static final String ENERGY_REFUSED = "energy not measured: the record's energy, more than "
            + UsageMeter.MAX_PLAUSIBLE_WATTS + " W over its time (and 60 s besides), was refused when read";

    /**
     * @return whether a device's energy is no more than a GPU can draw over its time and the meter's one allowance for
     *         a clock stepped back ({@code e <= 10 kW x (em + UsageMeter.ENERGY_SLACK_MILLIS)}): the bound the meter
     *         keeps, so a record it wrote is never refused (review28)
     */
    static boolean plausibleEnergy(UsageFigures f) {
        return plausibleEnergy(f, 1);
    }

    /**
     * @return whether the sum of {@code parts} devices' figures, each plausible
     *         ({@link #plausibleEnergy(UsageFigures)}), can be what {@code f} holds: each part brought its own
     *         allowance, and 1 ms more for each part after the first for the rounding down of each part's check (a day
     *         summary row; review30)
     */
    static boolean plausibleEnergy(UsageFigures f, int parts) {
        long allowance = UsageMeter.ENERGY_SLACK_MILLIS + (Math.max(1, parts) - 1L) * (UsageMeter.ENERGY_SLACK_MILLIS
                + 1);
        return f.energyMillijoules / UsageMeter.MAX_PLAUSIBLE_WATTS <= f.energyMillis + allowance;
    }

    private static UsageFigures figures(JsonNode d) {
        UsageFigures f = new UsageFigures();
        f.heldMillis = nonNegative(d, "held", true);
        f.measuredMillis = nonNegative(d, "meas", true);
        f.utilizationMillis = nonNegative(d, "um", true);
        f.utilizationPercentMillis = real(d, "us", 0, 100.0 * f.utilizationMillis, true);
        f.utilizationPeak = d.has("up") ? real(d, "up", 0, 100, true) : -1;
        f.idleMillis = nonNegative(d, "idle", true);
        f.memoryPeakBytes = d.has("mp") ? nonNegative(d, "mp", true) : -1;
        f.energyMillijoules = nonNegative(d, "e", true);
        f.estimatedMillijoules = nonNegative(d, "ee", true);
        f.energyMillis = nonNegative(d, "em", true);
        if (f.measuredMillis > f.heldMillis || f.utilizationMillis > f.measuredMillis
                || f.idleMillis > f.utilizationMillis || f.energyMillis > f.heldMillis
                || f.estimatedMillijoules > f.energyMillijoules) {
            throw new AccountingFormatException("figures out of order: expected idle <= um <= meas <= held, em <="
                    + " held and ee <= e; got held " + f.heldMillis + ", meas " + f.measuredMillis + ", um "
                    + f.utilizationMillis + ", idle " + f.idleMillis + ", em " + f.energyMillis + ", e "
                    + f.energyMillijoules + ", ee " + f.estimatedMillijoules);
        }
        if (f.utilizationPeak < 0 && f.utilizationMillis > 0) {
            throw new AccountingFormatException("up: a peak utilization is required where um > 0");
        }
        return f;
    }

    private static void only(JsonNode n, Set<String> keys, String what) {
        for (Iterator<String> it = n.fieldNames(); it.hasNext();) {
            String k = it.next();
            if (!keys.contains(k)) {
                throw new AccountingFormatException("unknown key \"" + printable(k) + "\" in a " + what + " record;"
                        + " valid keys: " + new TreeSet<>(keys));
            }
        }
    }

    private static Optional<String> text(JsonNode n, String key, boolean required) {
        JsonNode v = n.get(key);
        if (v == null || v.isNull()) {
            if (required) {
                throw new AccountingFormatException(key + ": required");
            }
            return Optional.empty();
        }
        if (!v.isTextual() || v.textValue().isEmpty() || v.textValue().length() > MAX_TEXT) {
            throw new AccountingFormatException(key + ": expected a text of 1 to " + MAX_TEXT + " characters");
        }
        return Optional.of(v.textValue());
    }

    /** @return the detail: a text of 0 to {@link #MAX_TEXT} characters (empty when absent) */
    private static String detail(JsonNode n) {
        JsonNode v = n.get("detail");
        if (v == null) {
            return "";
        }
        if (!v.isTextual() || v.textValue().length() > MAX_TEXT) {
            throw new AccountingFormatException("detail: expected a text of at most " + MAX_TEXT + " characters");
        }
        return v.textValue();
    }

    private static boolean bool(JsonNode n, String key) {
        JsonNode v = n.get(key);
        if (v == null) {
            return false;
        }
        if (!v.isBoolean()) {
            throw new AccountingFormatException(key + ": expected true or false");
        }
        return v.booleanValue();
    }

    private static long nonNegative(JsonNode n, String key, boolean required) {
        JsonNode v = n.get(key);
        if (v == null) {
            if (required) {
                throw new AccountingFormatException(key + ": required (a whole number >= 0)");
            }
            return 0;
        }
        if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
            throw new AccountingFormatException(key + ": expected a whole number from 0 to " + Long.MAX_VALUE);
        }
        return v.longValue();
    }

    private static OptionalLong n(JsonNode n, String key) {
        return n.has(key) ? OptionalLong.of(nonNegative(n, key, true)) : OptionalLong.empty();
    }

    private static int integer(JsonNode n, String key, int min, int max) {
        long v = nonNegative(n, key, true);
        if (v < min || v > max) {
            throw new AccountingFormatException(key + ": expected " + min + " to " + max + ", was " + v);
        }
        return (int) v;
    }

    private static long time(JsonNode n, String key) {
        long v = nonNegative(n, key, true);
        if (v > MAX_EPOCH_MILLIS) {
            throw new AccountingFormatException(key + ": " + v + " is after the year 9999 (milliseconds since"
                    + " 1970 expected)");
        }
        return v;
    }

    private static double real(JsonNode n, String key, double min, double max, boolean required) {
        JsonNode v = n.get(key);
        if (v == null) {
            if (required) {
                throw new AccountingFormatException(key + ": required");
            }
            return 0;
        }
        double d = v.isNumber() ? v.doubleValue() : Double.NaN;
        if (!(d >= min && d <= max * (1 + 1e-9) + 1e-9)) {
            throw new AccountingFormatException(key + ": expected a number from " + min + " to " + max);
        }
        return d;
    }

    static String printable(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && i < 64; i++) {
            char c = s.charAt(i);
            b.append(c < 0x20 || c > 0x7e ? String.format("\\u%04x", (int) c) : String.valueOf(c));
        }
        return s.length() > 64 ? b + "..." : b.toString();
    }
}
