package io.gpusched.core.adversarial.topology;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.math.BigInteger;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * A second exact oracle, independent of {@link BruteForceOracle} (another reviewer's): the candidates' pair weights
 * copied into a matrix once, every k-subset holding the required devices enumerated with incrementally kept sums, keys
 * in {@link BigInteger} (no overflow to guard). From TopologyAwareStrategy's Javadoc: a pair weighs 100 per link plus
 * the PCIe term; SET's key is (set score, minus the set's score to the free devices left, minus the sum of candidate
 * positions); REMAINING's is (set score + score among the free devices left, set score, minus positions). "Free" here
 * is the candidate list (the views built by these tests hold no free non-candidate).
 */
final class SubsetOracle {
    private SubsetOracle() {
    }

    static long pcie(PcieLevel l) {
        return switch (l) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
    }

    static BigInteger weight(GpuTopology t, int a, int b) {
        return BigInteger.valueOf(t.linkCount(a, b)).multiply(BigInteger.valueOf(100))
                .add(BigInteger.valueOf(pcie(t.pcieLevel(a, b))));
    }

    static GpuDevice device(int index) {
        return GpuDevice.builder().index(index).uuid("GPU-r23c-" + index).vendor(GpuVendor.NVIDIA).name("R23C")
                .memory(MemorySize.ofGibibytes(16)).pciBusId(String.format("0000:%02x:%02x.0", 1 + index / 32,
                        index % 32))
                .numaNode(0).minor(index).build();
    }

    static DeviceState held(GpuDevice d) {
        return new DeviceState(d, GpuHealth.HEALTHY, Optional.of("someone"), 0, MemorySize.ZERO, Optional.empty(),
                DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
    }

    static SchedulingView view(List<DeviceState> all, List<DeviceState> cands, GpuTopology topology) {
        List<DeviceState> a = List.copyOf(all);
        List<DeviceState> c = List.copyOf(cands);
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return a;
            }

            @Override
            public List<DeviceState> candidates() {
                return c;
            }

            @Override
            public DeviceState device(int index) {
                return a.stream().filter(d -> d.index() == index).findFirst().orElseThrow();
            }

            @Override
            public GpuTopology topology() {
                return topology;
            }

            @Override
            public Instant now() {
                return Instant.parse("2026-11-25T00:00:00Z");
            }
        };
    }

    /** The documented key of {@code set} (indices) on {@code v}: larger is better, lexicographically. */
    static BigInteger[] key(Objective o, SchedulingView v, List<Integer> set) {
        List<Integer> cands = v.candidates().stream().map(DeviceState::index).toList();
        Set<Integer> in = new HashSet<>(set);
        BigInteger score = BigInteger.ZERO;
        BigInteger toFree = BigInteger.ZERO;
        BigInteger amongFree = BigInteger.ZERO;
        GpuTopology t = v.topology();
        for (int i = 0; i < cands.size(); i++) {
            for (int j = i + 1; j < cands.size(); j++) {
                int a = cands.get(i);
                int b = cands.get(j);
                BigInteger w = weight(t, a, b);
                boolean ia = in.contains(a);
                boolean ib = in.contains(b);
                if (ia && ib) {
                    score = score.add(w);
                } else if (ia || ib) {
                    toFree = toFree.add(w);
                } else {
                    amongFree = amongFree.add(w);
                }
            }
        }
        long pos = 0;
        for (int x : set) {
            pos += cands.indexOf(x);
        }
        if (o == Objective.SET) {
            return new BigInteger[]{score, toFree.negate(), BigInteger.valueOf(-pos)};
        }
        return new BigInteger[]{score.add(amongFree), score, BigInteger.valueOf(-pos)};
    }

    static int compare(BigInteger[] x, BigInteger[] y) {
        for (int i = 0; i < x.length; i++) {
            int c = x[i].compareTo(y[i]);
            if (c != 0) {
                return c;
            }
        }
        return 0;
    }

    /** @return the best key of every k-subset of the candidates that holds {@code required} */
    static BigInteger[] best(Objective o, SchedulingView v, int k, List<Integer> required) {
        List<Integer> cands = v.candidates().stream().map(DeviceState::index).toList();
        int n = cands.size();
        BigInteger[][] w = new BigInteger[n][n];
        BigInteger total = BigInteger.ZERO;
        BigInteger[] row = new BigInteger[n];
        for (int i = 0; i < n; i++) {
            row[i] = BigInteger.ZERO;
        }
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                w[i][j] = weight(v.topology(), cands.get(i), cands.get(j));
                w[j][i] = w[i][j];
                total = total.add(w[i][j]);
                row[i] = row[i].add(w[i][j]);
                row[j] = row[j].add(w[i][j]);
            }
        }
        boolean[] req = new boolean[n];
        for (int r : required) {
            req[cands.indexOf(r)] = true;
        }
        int[] chosen = new int[k];
        BigInteger[][] best = {null};
        walk(o, w, row, total, req, chosen, 0, 0, k, BigInteger.ZERO, BigInteger.ZERO, 0, best);
        return best[0];
    }

    /** Chooses positions in increasing order; {@code inner} = set score, {@code rowSum} = sum of chosen rows. */
    private static void walk(Objective o, BigInteger[][] w, BigInteger[] row, BigInteger total, boolean[] req,
            int[] chosen, int depth, int from, int k, BigInteger inner, BigInteger rowSum,
            long pos, BigInteger[][] best) {
        int n = w.length;
        if (depth == k) {
            for (int i = from; i < n; i++) {
                if (req[i]) {
                    return; // a required device left out
                }
            }
            // score to the free left = sum of rows - 2 x inner; among the free left = total - inner - that
            BigInteger cut = rowSum.subtract(inner.shiftLeft(1));
            BigInteger[] key = o == Objective.SET
                    ? new BigInteger[]{inner, cut.negate(), BigInteger.valueOf(-pos)}
                    : new BigInteger[]{total.subtract(cut), inner, BigInteger.valueOf(-pos)};
            if (best[0] == null || compare(key, best[0]) > 0) {
                best[0] = key;
            }
            return;
        }
        for (int i = from; i <= n - (k - depth); i++) {
            BigInteger add = inner;
            for (int d = 0; d < depth; d++) {
                add = add.add(w[chosen[d]][i]);
            }
            chosen[depth] = i;
            walk(o, w, row, total, req, chosen, depth + 1, i + 1, k, add, rowSum.add(row[i]), pos + i, best);
            if (req[i]) {
                return; // every later choice would leave required position i out
            }
        }
    }

    /** @return null when {@code got} is k distinct candidates holding {@code required}, else what is wrong */
    static String invalid(SchedulingView v, int k, List<Integer> required, List<Integer> got) {
        if (got.size() != k) {
            return "size " + got.size() + " != " + k + ": " + got;
        }
        Set<Integer> s = new HashSet<>(got);
        if (s.size() != got.size()) {
            return "duplicates in " + got;
        }
        Set<Integer> cands = new HashSet<>(v.candidates().stream().map(DeviceState::index).toList());
        for (int x : got) {
            if (!cands.contains(x)) {
                return "not a candidate (held, unhealthy or unknown): " + x + " in " + got;
            }
        }
        if (!s.containsAll(required)) {
            return "required " + required + " missing from " + got;
        }
        return null;
    }

    static List<Integer> indices(List<DeviceState> ds) {
        List<Integer> out = new ArrayList<>();
        ds.forEach(d -> out.add(d.index()));
        return out;
    }
}
