package io.gpusched.yarn;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The strategy's answers per offered set and count, for {@code allocateDevices}: YARN offers the same few sets again
 * and again, and the answer depends only on them (the offered devices are the free ones of the view, every other
 * device is held; the topology is static). Health is read before the key is made (an unhealthy device is never
 * offered to the strategy), so a health change reaches the cache as another key. Least recently used entries go past
 * {@code capacity}. A lookup allocates one small key object; the answer is shared, never copied. Thread-safe.
 */
final class PlacementCache {

    /** An offered set (bits over device indices) and a count. */
    private static final class Key {
        final int count;
        final long[] offered;
        final int hash;

        Key(int count, long[] offered) {
            this.count = count;
            this.offered = offered;
            this.hash = 31 * count + Arrays.hashCode(offered);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.count == count && Arrays.equals(k.offered, offered);
        }

        @Override
        public int hashCode() {
            return hash;
        }
    }

    private final Map<Key, int[]> answers;

    /** @param capacity most entries kept */
    PlacementCache(int capacity) {
        this.answers = new LinkedHashMap<>(64, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Key, int[]> eldest) {
                return size() > capacity;
            }
        };
    }

    /**
     * @param offered the healthy offered device indices as bits ({@link Offer#bits()}); read, not kept
     * @param count   devices asked
     * @param compute the strategy's answer (device indices) when not cached; an empty answer (a decline) is not cached
     * @return the cached or computed answer; callers must not modify it
     */
    int[] choose(long[] offered, int count, Supplier<int[]> compute) {
        Key probe = new Key(count, offered);
        synchronized (answers) {
            int[] hit = answers.get(probe);
            if (hit != null) {
                return hit;
            }
        }
        int[] got = compute.get().clone();
        if (got.length > 0) {
            synchronized (answers) {
                answers.put(new Key(count, offered.clone()), got);
            }
        }
        return got;
    }

    /** Forgets every answer (a new inventory or strategy). */
    void clear() {
        synchronized (answers) {
            answers.clear();
        }
    }

    /** @return entries held (tests) */
    int size() {
        synchronized (answers) {
            return answers.size();
        }
    }
}
