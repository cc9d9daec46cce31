package io.gpusched.core;

import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.Base64;
import java.util.BitSet;
import java.util.Optional;
import java.util.zip.DataFormatException;
import java.util.zip.Deflater;
import java.util.zip.Inflater;

/**
 * Which ledger sequence numbers were allocations, so that {@code release("P-2")} of a release record's sequence, or of
 * a number never reached, is told apart from a second release of a real allocation. One bit per sequence (a million
 * changes: 125 KB in memory; a compacted ledger keeps it deflated in its snapshot, where alternating
 * allocate/release patterns shrink to a few hundred bytes). Exact from {@link #exactFrom()} on; below it (history
 * compacted by a version that did not keep this) an id is taken as issued, as before.
 *
 * <p>Shared by a {@link NodeState} and its rollback copies: sequences only grow, each applied record writes its own
 * bit, and {@link #issued} ignores bits beyond the state's sequence, so a rolled-back append leaves nothing visible.
 */
final class IssuedIds {
    private long[] words = new long[16];
    private long exactFrom;

    /** Records whether the record at {@code seq} was an allocation. */
    void mark(long seq, boolean allocation) {
        if (seq < 0 || seq > Integer.MAX_VALUE * 64L - 1) {
            return; // beyond what a bit per sequence can hold: such ids are judged by their range only
        }
        int w = (int) (seq >>> 6);
        if (w >= words.length) {
            words = Arrays.copyOf(words, Math.max(w + 1, words.length * 2));
        }
        long bit = 1L << (seq & 63);
        words[w] = allocation ? words[w] | bit : words[w] & ~bit;
    }

    /**
     * @param seq      the id's sequence
     * @param sequence the state's last applied sequence
     * @return whether the node issued an allocation with this sequence
     */
    boolean issued(long seq, long sequence) {
        if (seq <= 0 || seq > sequence) {
            return false;
        }
        if (seq < exactFrom) {
            return true;
        }
        int w = (int) (seq >>> 6);
        return w < words.length && (words[w] & (1L << (seq & 63))) != 0;
    }

    /** @return the first sequence this set knows exactly */
    long exactFrom() {
        return exactFrom;
    }

    /** Called for a snapshot without issued ids: everything up to {@code seq} is taken as issued. */
    void unknownUpTo(long seq) {
        exactFrom = Math.max(exactFrom, seq + 1);
    }

    /** @return bits up to {@code sequence}, deflated and base64-encoded, with {@code exactFrom} first ("N:base64") */
    String encode(long sequence) {
        BitSet bits = BitSet.valueOf(words);
        if (sequence + 1 < bits.length()) {
            bits.clear((int) Math.min(Integer.MAX_VALUE, sequence + 1), bits.length());
        }
        byte[] raw = bits.toByteArray();
        Deflater d = new Deflater(Deflater.BEST_COMPRESSION);
        d.setInput(raw);
        d.finish();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[4096];
        while (!d.finished()) {
            out.write(buf, 0, d.deflate(buf));
        }
        d.end();
        return exactFrom + ":" + Base64.getEncoder().encodeToString(out.toByteArray());
    }

    /**
     * @param text what {@link #encode} wrote
     * @return the set, or empty when the text is not of that form
     */
    static Optional<IssuedIds> decode(String text) {
        int colon = text.indexOf(':');
        if (colon <= 0 || colon > 19) {
            return Optional.empty();
        }
        try {
            long from = Long.parseLong(text.substring(0, colon));
            byte[] packed = Base64.getDecoder().decode(text.substring(colon + 1));
            Inflater inf = new Inflater();
            inf.setInput(packed);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[4096];
            while (!inf.finished()) {
                int n = inf.inflate(buf);
                if (n == 0 && (inf.needsInput() || inf.needsDictionary())) {
                    inf.end();
                    return Optional.empty();
                }
                out.write(buf, 0, n);
                if (out.size() > (Integer.MAX_VALUE / 16)) {
                    inf.end();
                    return Optional.empty();
                }
            }
            inf.end();
            IssuedIds ids = new IssuedIds();
            long[] w = BitSet.valueOf(out.toByteArray()).toLongArray();
            ids.words = Arrays.copyOf(w, Math.max(16, w.length));
            ids.exactFrom = Math.max(0, from);
            return Optional.of(ids);
        } catch (IllegalArgumentException | DataFormatException e) {
            return Optional.empty();
        }
    }
}
