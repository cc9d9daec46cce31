package io.gpusched.core.strategy;

import io.gpusched.core.GpuTopology;
import java.util.Arrays;
import java.util.List;

/**
 * A topology's pair scores ({@link PairScore}), indexed by position among its devices (not by device index, so device
 * indices 0 and 60000 make a 2 x 2 table), with its devices grouped into classes of twins: devices with the same score
 * to every other device (the partitions of one GPU or package, the GPUs of an NVSwitch board). Twins are
 * interchangeable for every objective that only reads pair scores, which is what lets the topology strategy search
 * over how many devices each class gives instead of over device subsets. Computed once per topology.
 */
final class TopologyScores {

    final GpuTopology topology;
    /** Device indices, ascending; a device's position is its place here. */
    final int[] indices;
    /** Pair scores by position, row-major n x n, 0 on the diagonal. */
    final long[] score;
    /** Class of each position. */
    final int[] classOf;
    /** Number of classes. */
    final int classes;
    /** Score between members of two classes, row-major classes x classes; the diagonal is the score of two twins. */
    final long[] classScore;
    /** Largest pair score. */
    final long maxScore;
    /** Position by device index where indices are dense enough (at most 4 per device), else null: binary search. */
    private final int[] dense;
    /**
     * Block of each class: classes with the same score to every other class (the packages of one NUMA node behind one
     * fabric), so that between two classes of one block, and between a class of block a and one of block b, there is
     * one score each.
     */
    final int[] blockOf;
    /** Number of blocks. */
    final int blocks;
    /** Devices in each class. */
    final int[] classSize;
    /**
     * Per class x: {@code sum_y classSize[y] x classScore[x][y]}, a member's scores to every device with its own twin
     * term counted once more, so that a search gets a member's affinity to the free devices by subtracting the few
     * that are not free; null when a sum would leave a long (the search then adds up the free devices itself).
     */
    final long[] fullRow;
    /** Largest table {@link #partnerPrefix()} builds (entries: classes x devices). */
    static final long PARTNER_TABLE_ENTRIES = 1L << 21;
    private volatile long[] partnerPrefix;

    TopologyScores(GpuTopology topology) {
        this.topology = topology;
        List<Integer> idx = topology.deviceIndices();
        int n = idx.size();
        indices = new int[n];
        for (int i = 0; i < n; i++) {
            indices[i] = idx.get(i);
        }
        int maxIndex = n == 0 ? -1 : indices[n - 1];
        if (maxIndex < 4 * n + 16) {
            dense = new int[maxIndex + 1];
            Arrays.fill(dense, -1);
            for (int i = 0; i < n; i++) {
                dense[indices[i]] = i;
            }
        } else {
            dense = null;
        }
        score = new long[n * n];
        long[] rowSum = new long[n];
        long max = 0;
        for (int a = 0; a < n; a++) {
            for (int b = a + 1; b < n; b++) {
                long s = PairScore.exact(topology, indices[a], indices[b]);
                score[a * n + b] = s;
                score[b * n + a] = s;
                rowSum[a] += s;
                rowSum[b] += s;
                max = Math.max(max, s);
            }
        }
        maxScore = max;
        classOf = new int[n];
        Arrays.fill(classOf, -1);
        int c = 0;
        int[] rep = new int[n];
        for (int a = 0; a < n; a++) {
            if (classOf[a] >= 0) {
                continue;
            }
            classOf[a] = c;
            rep[c] = a;
            for (int b = a + 1; b < n; b++) {
                if (classOf[b] < 0 && rowSum[a] == rowSum[b] && twins(a, b, c)) {
                    classOf[b] = c;
                }
            }
            c++;
        }
        classes = c;
        classScore = new long[c * c];
        int[] second = new int[c];
        Arrays.fill(second, -1);
        for (int a = 0; a < n; a++) {
            if (rep[classOf[a]] != a && second[classOf[a]] < 0) {
                second[classOf[a]] = a;
            }
        }
        for (int x = 0; x < c; x++) {
            for (int y = 0; y < c; y++) {
                if (x == y) {
                    classScore[x * c + y] = second[x] < 0 ? 0 : score[rep[x] * n + second[x]];
                } else {
                    classScore[x * c + y] = score[rep[x] * n + rep[y]];
                }
            }
        }
        blockOf = blocks(classScore, c);
        blocks = Arrays.stream(blockOf).max().orElse(-1) + 1;
        classSize = new int[c];
        for (int a = 0; a < n; a++) {
            classSize[classOf[a]]++;
        }
        fullRow = fullRows(classScore, classSize, c);
    }

    /**
     * Per class x and m in 0..n-1, at {@code x * n + m}: the sum of the m largest scores of a class-x member to the
     * other devices of the topology. A bound for any pool (a subset of the topology), built once per topology on first
     * use (a sort of one row per class); null where it would exceed {@link #PARTNER_TABLE_ENTRIES} entries or a sum
     * would leave a long.
     */
    long[] partnerPrefix() {
        long[] t = partnerPrefix;
        if (t != null || fullRow == null || (long) classes * indices.length > PARTNER_TABLE_ENTRIES) {
            return t;
        }
        int n = indices.length;
        int[] rep = new int[classes];
        Arrays.fill(rep, -1);
        for (int a = 0; a < n; a++) {
            if (rep[classOf[a]] < 0) {
                rep[classOf[a]] = a;
            }
        }
        t = new long[classes * n];
        long[] row = new long[n];
        for (int x = 0; x < classes; x++) {
            int a = rep[x];
            int q = 0;
            for (int b = 0; b < n; b++) {
                if (b != a) {
                    row[q++] = score[a * n + b];
                }
            }
            Arrays.sort(row, 0, q);
            long sum = 0;
            for (int m = 1; m <= q; m++) {
                sum += row[q - m]; // at most the full row, which fits
                t[x * n + m] = sum;
            }
        }
        partnerPrefix = t;
        return t;
    }

    /** @return per class, the size-weighted sum of its class scores; null if one leaves a long */
    private static long[] fullRows(long[] cs, int[] size, int c) {
        long[] out = new long[c];
        try {
            for (int x = 0; x < c; x++) {
                long s = 0;
                for (int y = 0; y < c; y++) {
                    s = Math.addExact(s, Math.multiplyExact((long) size[y], cs[x * c + y]));
                }
                out[x] = s;
            }
        } catch (ArithmeticException e) {
            return null;
        }
        return out;
    }

    /** @return blocks of classes: twins among classes, the score within a class ignored */
    private static int[] blocks(long[] cs, int c) {
        int[] block = new int[c];
        Arrays.fill(block, -1);
        int b = 0;
        for (int x = 0; x < c; x++) {
            if (block[x] >= 0) {
                continue;
            }
            block[x] = b;
            for (int y = x + 1; y < c; y++) {
                if (block[y] >= 0) {
                    continue;
                }
                boolean twins = true;
                for (int l = 0; l < c && twins; l++) {
                    if (l != x && l != y && cs[x * c + l] != cs[y * c + l]) {
                        twins = false;
                    }
                }
                if (twins) {
                    block[y] = b;
                }
            }
            b++;
        }
        return block;
    }

    /** Whether b has a's scores to every device but the two, and to every member of class {@code c} found so far. */
    private boolean twins(int a, int b, int c) {
        int n = indices.length;
        long ab = score[a * n + b];
        for (int x = 0; x < n; x++) {
            if (x == a || x == b) {
                continue;
            }
            if (score[a * n + x] != score[b * n + x]) {
                return false;
            }
            if (classOf[x] == c && score[a * n + x] != ab) {
                return false;
            }
        }
        return true;
    }

    /** @return the position of a device index, or -1 if the topology does not cover it */
    int position(int index) {
        if (dense != null) {
            return index >= 0 && index < dense.length ? dense[index] : -1;
        }
        int p = Arrays.binarySearch(indices, index);
        return p < 0 ? -1 : p;
    }

    /** @return the pair score of two positions */
    long score(int a, int b) {
        return score[a * indices.length + b];
    }
}
