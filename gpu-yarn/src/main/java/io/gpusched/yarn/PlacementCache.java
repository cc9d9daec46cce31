package io.gpusched.yarn;

import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The strategy's answers per offered set and count, for {@code allocateDevices}: YARN offers the same few sets again
 * and again, and the answer depends only on them (the offered devices are the free ones of the view, every other
 * device is held; the topology is static). Health is read before the key is made (an unhealthy device is never
 * offered to the strategy), so a health change reaches the cache as another key. Least recently used entries go past
 * {@code capacity}. Thread-safe.
 */
final class PlacementCache {

    private record Key(int count, int[] offered) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.count == count && Arrays.equals(k.offered, offered);
        }

        @Override
        public int hashCode() {
            return 31 * count + Arrays.hashCode(offered);
        }
    }

    private final Map<Key, List<Integer>> answers;

    /** @param capacity most entries kept */
    PlacementCache(int capacity) {
        this.answers = new LinkedHashMap<>(64, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<Key, List<Integer>> eldest) {
                return size() > capacity;
            }
        };
    }

    /**
     * @param offered healthy offered device indices
     * @param count   devices asked
     * @param compute the strategy's answer when not cached; an empty answer (a decline) is not cached
     * @return the cached or computed answer (unmodifiable)
     */
    List<Integer> choose(Collection<Integer> offered, int count, Supplier<List<Integer>> compute) {
        int[] ids = new int[offered.size()];
        int i = 0;
        for (int x : offered) {
            ids[i++] = x;
        }
        Arrays.sort(ids);
        Key key = new Key(count, ids);
        synchronized (answers) {
            List<Integer> hit = answers.get(key);
            if (hit != null) {
                return hit;
            }
        }
        List<Integer> got = List.copyOf(compute.get());
        if (!got.isEmpty()) {
            synchronized (answers) {
                answers.put(key, got);
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
