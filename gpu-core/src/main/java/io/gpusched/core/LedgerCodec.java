package io.gpusched.core;

import io.gpusched.core.LedgerException.Kind;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.zip.CRC32C;

/**
 * The node ledger's text format: a header line {@code gpusched-ledger <format> <node prefix> <generation> <crc32c>},
 * then one record per line, {@code <sequence> <crc32c of "<sequence> <json>", 8 hex digits> <json>}, the JSON being
 * {@link LedgerRecord}'s. Encodes records and headers; decodes them, refusing what is damaged with its offset.
 * Knows nothing of files, locks or ordering (see {@link LedgerFile}).
 */
final class LedgerCodec {
    /** The format this version writes and reads. */
    static final int FORMAT = 1;
    static final String MAGIC = "gpusched-ledger";

    /** A record and its sequence. */
    record Entry(long seq, LedgerRecord record) {
    }

    /**
     * A decoded header.
     *
     * @param prefix     the node's id prefix
     * @param generation the file's generation (one more at each compaction)
     * @param length     the bytes the header line takes, its newline included
     */
    record Header(String prefix, long generation, int length) {
    }

    private LedgerCodec() {
    }

    /** @return the header line for a file of this node prefix and generation, with its newline */
    static String header(String prefix, long generation) {
        String head = MAGIC + " " + FORMAT + " " + prefix + " " + generation;
        return head + ' ' + crcHex(head) + '\n';
    }

    /**
     * Decodes the header from the first bytes of {@code file}.
     *
     * @throws LedgerException {@code CORRUPT} (not a ledger, or a damaged header) or {@code NEWER_FORMAT}
     */
    static Header header(Path file, byte[] bytes) {
        int nl = indexOf(bytes, 0, bytes.length, (byte) '\n');
        String head = new String(bytes, 0, nl < 0 ? bytes.length : nl, StandardCharsets.ISO_8859_1);
        String[] f = head.split(" ", -1);
        if (f.length < 2 || !f[0].equals(MAGIC)) {
            throw new LedgerException(Kind.CORRUPT, file, file + " is not a gpusched node ledger (its first line"
                    + " does not start with \"" + MAGIC + " <format>\"); move it away or point gpu.state_dir elsewhere",
                    null);
        }
        int format;
        try {
            format = Integer.parseInt(f[1]);
        } catch (NumberFormatException e) {
            format = -1;
        }
        if (format > FORMAT) {
            throw new LedgerException(Kind.NEWER_FORMAT, file, "the node ledger " + file + " was written in format "
                    + format + " by a newer gpusched; this one reads format " + FORMAT + " and will not guess: upgrade"
                    + " every gpusched on this node, or use another state directory", null);
        }
        if (format < 1 || nl < 0 || f.length != 5
                || !f[4].equals(crcHex(f[0] + " " + f[1] + " " + f[2] + " " + f[3]))) {
            throw new LedgerException(Kind.CORRUPT, file, "the header of the node ledger " + file + " is damaged"
                    + " (offset 0: \"" + head.replaceAll("[^ -~]", "?") + "\"); restore the file or move it away",
                    null);
        }
        long generation;
        try {
            generation = Long.parseLong(f[3]);
        } catch (NumberFormatException e) {
            throw new LedgerException(Kind.CORRUPT, file, "the header of " + file + " has no generation", e);
        }
        return new Header(f[2], generation, nl + 1);
    }

    /** @return the record lines of {@code entries}, in order, as UTF-8 */
    static byte[] encode(List<Entry> entries) {
        StringBuilder sb = new StringBuilder(entries.size() * 256);
        for (Entry e : entries) {
            line(sb, e.seq(), LedgerRecord.toJson(e.record()));
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Appends the record line {@code <seq> <crc> <json>\n} to {@code sb}. */
    static void line(StringBuilder sb, long seq, String json) {
        String s = Long.toString(seq);
        sb.append(s).append(' ').append(crcHex(s + " " + json)).append(' ').append(json).append('\n');
    }

    /** @return the CRC-32C of {@code text}'s UTF-8 bytes, 8 lower-case hex digits */
    static String crcHex(String text) {
        CRC32C c = new CRC32C();
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return String.format(Locale.ROOT, "%08x", c.getValue());
    }

    /**
     * Decodes the complete record line {@code b[pos, nl)} (its newline at {@code nl}).
     *
     * @param file    the ledger, for messages
     * @param at      the line's offset in the file
     * @param after   the sequence of the record before it (0 or less: none), for messages
     * @param decoder a UTF-8 decoder that reports malformed input
     * @return the line's sequence and record
     * @throws LedgerException {@code CORRUPT} naming the offset when the line is not a whole, intact record
     */
    static Entry decode(Path file, byte[] b, int pos, int nl, long at, long after, CharsetDecoder decoder) {
        int sp1 = indexOf(b, pos, nl, (byte) ' ');
        int sp2 = sp1 < 0 ? -1 : indexOf(b, sp1 + 1, nl, (byte) ' ');
        if (sp2 < 0) {
            throw corrupt(file, at, after, "not a record (no \"<sequence> <checksum> <json>\")");
        }
        long seq;
        long crc;
        try {
            seq = Long.parseLong(new String(b, pos, sp1 - pos, StandardCharsets.ISO_8859_1));
            crc = Long.parseLong(new String(b, sp1 + 1, sp2 - sp1 - 1, StandardCharsets.ISO_8859_1), 16);
        } catch (NumberFormatException e) {
            throw corrupt(file, at, after, "unreadable sequence or checksum");
        }
        CRC32C c = new CRC32C();
        c.update(b, pos, sp1 - pos);
        c.update(' ');
        c.update(b, sp2 + 1, nl - sp2 - 1);
        if (c.getValue() != crc) {
            throw corrupt(file, at, after, "checksum mismatch");
        }
        String json;
        try {
            json = decoder.decode(ByteBuffer.wrap(b, sp2 + 1, nl - sp2 - 1)).toString();
        } catch (CharacterCodingException e) {
            throw corrupt(file, at, after, "not UTF-8");
        }
        LedgerRecord r;
        try {
            r = LedgerRecord.fromJson(json);
        } catch (RuntimeException e) {
            throw corrupt(file, at, after, e.getMessage());
        }
        return new Entry(seq, r);
    }

    /** @return {@code CORRUPT}: the record at {@code offset} (after sequence {@code after}) is damaged: {@code what} */
    static LedgerException corrupt(Path file, long offset, long after, String what) {
        return new LedgerException(Kind.CORRUPT, file, "the node ledger " + file + " is damaged at offset " + offset
                + (after > 0 ? " (the record after sequence " + after + ")" : "") + ": " + what + "; the records"
                + " after it cannot be trusted, so it is not opened: restore it from a backup, or move it away to"
                + " start with no allocations", null);
    }

    /** @return the index of {@code x} in {@code b[from, to)}, or -1 */
    static int indexOf(byte[] b, int from, int to, byte x) {
        for (int i = from; i < to; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }
}
