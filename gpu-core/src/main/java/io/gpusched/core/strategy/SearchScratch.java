package io.gpusched.core.strategy;

import java.util.concurrent.atomic.AtomicReference;

/**
 * The topology search's large per-call tables (classes x classes pair weights, their reordered copies, suffix maxima),
 * kept between calls so that a search on a 1,024-device node does not allocate and zero about 28 MB each time (that
 * allocation, and the collections it caused, made the slowest calls about twice the typical ones; issue 23). Every
 * table handed out is written whole before it is read, so old contents never leak into a search. One spare is kept
 * per strategy ({@link #take}/{@link #give}): concurrent searches take a fresh one, and a spare larger than {@link
 * #KEPT_BYTES} is dropped rather than kept.
 */
final class SearchScratch {

    /** Largest scratch (bytes) a strategy keeps between calls. */
    static final long KEPT_BYTES = 64L << 20;
    /** Tables by use. */
    static final int PAIR_A = 0;
    static final int PAIR_B = 1;
    static final int ORDER_A = 2;
    static final int ORDER_B = 3;
    static final int SUFFIX_A = 4;
    static final int SUFFIX_B = 5;
    private static final int TABLES = 6;

    private final long[][] tables = new long[TABLES][];

    /**
     * @return a table of at least {@code size} entries, contents unspecified (the caller writes before it reads)
     */
    long[] table(int which, int size) {
        long[] t = tables[which];
        if (t == null || t.length < size) {
            t = new long[size];
            tables[which] = t;
        }
        return t;
    }

    /** Hands a table back under another use (after a swap of two tables, see the search's reordering). */
    void put(int which, long[] table) {
        tables[which] = table;
    }

    private long bytes() {
        long b = 0;
        for (long[] t : tables) {
            b += t == null ? 0 : 8L * t.length;
        }
        return b;
    }

    /** @return the spare of {@code spare}, or a new scratch when another search holds it */
    static SearchScratch take(AtomicReference<SearchScratch> spare) {
        SearchScratch s = spare.getAndSet(null);
        return s != null ? s : new SearchScratch();
    }

    /** Keeps {@code s} as the spare unless it is larger than {@link #KEPT_BYTES}. */
    static void give(AtomicReference<SearchScratch> spare, SearchScratch s) {
        if (s.bytes() <= KEPT_BYTES) {
            spare.set(s);
        }
    }
}
