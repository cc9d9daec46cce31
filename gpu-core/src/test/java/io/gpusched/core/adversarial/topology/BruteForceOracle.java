package io.gpusched.core.adversarial.topology;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * An exact oracle of the tests' own, written from TopologyAwareStrategy's Javadoc only: a pair scores 100 per link plus
 * the PCIe term (INTERNAL 60 .. SYSTEM 10); SET maximizes (set score, -affinity to GPUs that stay free, -candidate
 * positions); REMAINING maximizes (set score + score among the GPUs that stay free, set score, -positions). Exclusive
 * requests on an all-free-or-held node only (no NUMA preference, no sharing), so the pool is the candidate list.
 * Arithmetic in {@link java.math.BigInteger}-free exact longs guarded by {@link Math#addExact}.
 */
final class BruteForceOracle {
    private BruteForceOracle() {
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

    static long pair(GpuTopology t, int a, int b) {
        return Math.addExact(Math.multiplyExact(100L, (long) t.linkCount(a, b)), pcie(t.pcieLevel(a, b)));
    }

    static GpuDevice device(int index) {
        return GpuDevice.builder().index(index).uuid("GPU-r23-" + index).vendor(GpuVendor.NVIDIA).name("R23")
                .memory(MemorySize.ofGibibytes(16)).pciBusId(String.format("0000:%02x:00.0", index + 1))
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
                return Instant.parse("2026-11-24T00:00:00Z");
            }
        };
    }

    static List<Integer> free(SchedulingView v) {
        List<Integer> f = new ArrayList<>();
        for (DeviceState d : v.devices()) {
            if (d.exclusiveHolder().isEmpty() && d.sharedHolders() == 0 && d.health().isHealthy()
                    && d.pool() == DeviceState.Pool.IN_POOL) {
                f.add(d.index());
            }
        }
        return f;
    }

    /** The documented key of one set (larger is better, compared lexicographically). */
    static long[] key(Objective o, SchedulingView v, List<Integer> set) {
        GpuTopology t = v.topology();
        long score = 0;
        for (int a = 0; a < set.size(); a++) {
            for (int b = a + 1; b < set.size(); b++) {
                score = Math.addExact(score, pair(t, set.get(a), set.get(b)));
            }
        }
        List<Integer> order = v.candidates().stream().map(DeviceState::index).toList();
        long pos = 0;
        for (int i : set) {
            pos += order.indexOf(i);
        }
        List<Integer> stay = new ArrayList<>(free(v));
        stay.removeAll(set);
        if (o == Objective.SET) {
            long aff = 0;
            for (int i : set) {
                for (int f : stay) {
                    aff = Math.addExact(aff, pair(t, i, f));
                }
            }
            return new long[]{score, -aff, -pos};
        }
        long left = 0;
        for (int a = 0; a < stay.size(); a++) {
            for (int b = a + 1; b < stay.size(); b++) {
                left = Math.addExact(left, pair(t, stay.get(a), stay.get(b)));
            }
        }
        return new long[]{Math.addExact(score, left), score, -pos};
    }

    static int compare(long[] x, long[] y) {
        for (int i = 0; i < x.length; i++) {
            if (x[i] != y[i]) {
                return Long.compare(x[i], y[i]);
            }
        }
        return 0;
    }

    /** The best key over every k-subset of the candidates that holds the required devices (plain enumeration). */
    static long[] best(Objective o, GpuRequest req, SchedulingView v) {
        List<Integer> pool = v.candidates().stream().map(DeviceState::index).toList();
        List<Integer> required = req.requiredDevices();
        List<Integer> rest = new ArrayList<>(pool);
        rest.removeAll(required);
        int need = req.count() - required.size();
        long[][] best = {null};
        enumerate(rest, 0, need, new ArrayList<>(required), s -> {
            long[] k = key(o, v, s);
            if (best[0] == null || compare(k, best[0]) > 0) {
                best[0] = k;
            }
        });
        return best[0];
    }

    private static void enumerate(List<Integer> rest, int from, int need, List<Integer> cur,
            java.util.function.Consumer<List<Integer>> out) {
        if (need == 0) {
            out.accept(cur);
            return;
        }
        for (int i = from; i <= rest.size() - need; i++) {
            cur.add(rest.get(i));
            enumerate(rest, i + 1, need - 1, cur, out);
            cur.remove(cur.size() - 1);
        }
    }

    static long subsets(int n, int k) {
        long c = 1;
        for (int i = 0; i < k; i++) {
            c = c * (n - i) / (i + 1);
            if (c > 10_000_000) {
                return c;
            }
        }
        return c;
    }

    /** @return null when valid: k distinct candidates holding every required device */
    static String invalid(GpuRequest req, SchedulingView v, List<Integer> got) {
        if (got.size() != req.count()) {
            return "size " + got.size() + " != " + req.count() + ": " + got;
        }
        Set<Integer> s = new HashSet<>(got);
        if (s.size() != got.size()) {
            return "duplicates in " + got;
        }
        Set<Integer> cands = new HashSet<>(v.candidates().stream().map(DeviceState::index).toList());
        if (!cands.containsAll(s)) {
            return "non-candidate in " + got + " (candidates " + cands + ")";
        }
        if (!s.containsAll(req.requiredDevices())) {
            return "required " + req.requiredDevices() + " missing from " + got;
        }
        return null;
    }
}
