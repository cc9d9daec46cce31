package io.gpusched.core.adversarial.placement;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Adversarial placement checks: every built-in strategy against an exact search written here (brute force over
 * subsets, with its own pair score read from {@link GpuTopology}: 100 per NVLink/XGMI link plus the PCIe term of
 * docs/PERFORMANCE.md), on fragmented pools, with and without required devices.
 */
class PlacementAttackTest {

    static final Instant NOW = Instant.parse("2026-01-01T00:00:00Z");

    // ---------------------------------------------------------------- independent scoring

    static int pcieTerm(PcieLevel l) {
        return switch (l) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
    }

    /** Pair scores by position among {@code ids}. */
    static long[][] matrix(GpuTopology t, int[] ids) {
        long[][] m = new long[ids.length][ids.length];
        for (int i = 0; i < ids.length; i++) {
            for (int j = 0; j < ids.length; j++) {
                if (i != j) {
                    m[i][j] = 100L * t.linkCount(ids[i], ids[j]) + pcieTerm(t.pcieLevel(ids[i], ids[j]));
                }
            }
        }
        return m;
    }

    static long setScore(GpuTopology t, List<Integer> set) {
        long s = 0;
        for (int i = 0; i < set.size(); i++) {
            for (int j = i + 1; j < set.size(); j++) {
                s += 100L * t.linkCount(set.get(i), set.get(j)) + pcieTerm(t.pcieLevel(set.get(i), set.get(j)));
            }
        }
        return s;
    }

    /** Best {SET score, SET+REMAINING score} over every k-subset of candidates holding the required ones. */
    static long[] exact(GpuTopology t, int[] cands, Set<Integer> required, int k) {
        long[][] m = matrix(t, cands);
        int n = cands.length;
        long total = 0;
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                total += m[i][j];
            }
        }
        long[] best = {Long.MIN_VALUE, Long.MIN_VALUE};
        boolean[] in = new boolean[n];
        long[] rowIn = new long[n]; // sum of scores from i to chosen set
        long[] rowAll = new long[n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                rowAll[i] += m[i][j];
            }
        }
        int[] req = new int[n];
        for (int i = 0; i < n; i++) {
            req[i] = required.contains(cands[i]) ? 1 : 0;
        }
        int[] reqAfter = new int[n + 1];
        for (int i = n - 1; i >= 0; i--) {
            reqAfter[i] = reqAfter[i + 1] + req[i];
        }
        search(m, n, k, 0, 0, 0L, 0L, in, rowIn, rowAll, req, reqAfter, total, best);
        return best;
    }

    private static void search(long[][] m, int n, int k, int pos, int chosen, long score, long cutSum, boolean[] in,
            long[] rowIn, long[] rowAll, int[] req, int[] reqAfter, long total, long[] best) {
        if (chosen == k) {
            if (reqAfter[pos] > 0) {
                return;
            }
            // remaining = total - score(set) - cut(set, rest); cut = sum over set of rowAll - 2*score
            long cut = cutSum - 2 * score;
            long remaining = total - score - cut;
            best[0] = Math.max(best[0], score);
            best[1] = Math.max(best[1], score + remaining);
            return;
        }
        if (n - pos < k - chosen || reqAfter[pos] > k - chosen) {
            return;
        }
        // take pos
        long add = rowIn[pos];
        for (int j = 0; j < n; j++) {
            rowIn[j] += m[pos][j];
        }
        search(m, n, k, pos + 1, chosen + 1, score + add, cutSum + rowAll[pos], in, rowIn, rowAll, req, reqAfter,
                total, best);
        for (int j = 0; j < n; j++) {
            rowIn[j] -= m[pos][j];
        }
        if (req[pos] == 0) {
            search(m, n, k, pos + 1, chosen, score, cutSum, in, rowIn, rowAll, req, reqAfter, total, best);
        }
    }

    static long remainingValue(GpuTopology t, int[] cands, List<Integer> set) {
        List<Integer> rest = new ArrayList<>();
        for (int c : cands) {
            if (!set.contains(c)) {
                rest.add(c);
            }
        }
        return setScore(t, set) + setScore(t, rest);
    }

    // ---------------------------------------------------------------- nodes and views

    static GpuDevice device(int index, int numa) {
        return GpuDevice.builder().index(index).uuid("GPU-" + index).vendor(GpuVendor.NVIDIA).name("Sim GPU")
                .memory(MemorySize.parse("80GB")).pciBusId(String.format("0000:%02x:00.0", index % 256))
                .numaNode(numa).build();
    }

    record Node(List<GpuDevice> devices, GpuTopology topology) {
    }

    static final PcieLevel[] LEVELS = PcieLevel.values();

    /** Random unstructured topology: random link counts and PCIe levels, so almost no twins. */
    static Node randomNode(Random r, int n) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ds.add(device(i, i < n / 2 ? 0 : 1));
        }
        GpuTopology.Builder b = GpuTopology.builder(ds);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int links = r.nextInt(4) == 0 ? r.nextInt(19) : 0;
                if (links > 0) {
                    b.links(i, j, links);
                }
                b.pcie(i, j, LEVELS[1 + r.nextInt(LEVELS.length - 1)]);
            }
        }
        return new Node(ds, b.build());
    }

    /** 8 packages x 8 partitions: same package 4 links, across packages 0..2 random (symmetric per package pair). */
    static Node partitioned(Random r) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            ds.add(device(i, i / 32));
        }
        GpuTopology.Builder b = GpuTopology.builder(ds);
        int[][] pkgLinks = new int[8][8];
        for (int p = 0; p < 8; p++) {
            for (int q = p + 1; q < 8; q++) {
                pkgLinks[p][q] = pkgLinks[q][p] = r.nextInt(3);
            }
        }
        for (int i = 0; i < 64; i++) {
            for (int j = i + 1; j < 64; j++) {
                int p = i / 8;
                int q = j / 8;
                if (p == q) {
                    b.links(i, j, 4);
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else if (pkgLinks[p][q] > 0) {
                    b.links(i, j, pkgLinks[p][q]);
                }
            }
        }
        return new Node(ds, b.build());
    }

    static Node profile(String name) {
        var inv = GpuInventories.simulated(name);
        return new Node(inv.devices(), inv.topology());
    }

    static SchedulingView view(Node node, List<DeviceState> states, List<DeviceState> candidates) {
        return new SchedulingView() {
            @Override
            public List<DeviceState> devices() {
                return states;
            }

            @Override
            public List<DeviceState> candidates() {
                return candidates;
            }

            @Override
            public DeviceState device(int index) {
                return states.stream().filter(s -> s.index() == index).findFirst()
                        .orElseThrow(() -> new IllegalArgumentException("no device " + index));
            }

            @Override
            public GpuTopology topology() {
                return node.topology();
            }

            @Override
            public Instant now() {
                return NOW;
            }
        };
    }

    /** Holds a random fraction exclusively; the rest (healthy, in pool) are the candidates. */
    static SchedulingView fragmented(Random r, Node node, double heldFraction, int maxCandidates) {
        List<DeviceState> states = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        List<Integer> order = new ArrayList<>();
        for (GpuDevice d : node.devices()) {
            order.add(d.index());
        }
        java.util.Collections.shuffle(order, r);
        Set<Integer> free = new HashSet<>();
        int freeCount = Math.max(2, Math.min(maxCandidates, (int) Math.round(order.size() * (1 - heldFraction))));
        free.addAll(order.subList(0, Math.min(freeCount, order.size())));
        for (GpuDevice d : node.devices()) {
            DeviceState s;
            if (free.contains(d.index())) {
                s = DeviceState.idle(d, GpuHealth.HEALTHY);
                cands.add(s);
            } else if (r.nextInt(5) == 0) {
                s = DeviceState.idle(d, GpuHealth.unhealthy("attack"));
            } else {
                s = new DeviceState(d, GpuHealth.HEALTHY, Optional.of("other-job"), 0, MemorySize.ZERO,
                        Optional.empty(), DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
            }
            states.add(s);
        }
        return view(node, states, cands);
    }

    static List<AllocationStrategy> builtIns() {
        List<AllocationStrategy> out = new ArrayList<>();
        for (String n : AllocationStrategies.names()) {
            out.add(AllocationStrategies.byName(n));
        }
        return out;
    }

    static void assertValid(String what, AllocationStrategy s, GpuRequest req, SchedulingView v, List<Integer> got) {
        assertEquals(req.count(), got.size(), what + " " + s.name() + " size: " + got);
        assertEquals(got.size(), new HashSet<>(got).size(), what + " " + s.name() + " duplicates: " + got);
        Set<Integer> cands = new HashSet<>();
        v.candidates().forEach(c -> cands.add(c.index()));
        assertTrue(cands.containsAll(got), what + " " + s.name() + " non-candidate in " + got + " of " + cands);
        assertTrue(got.containsAll(req.requiredDevices()), what + " " + s.name() + " dropped required "
                + req.requiredDevices() + " in " + got);
    }

    /** Compares topology (SET) and topology-remaining with the exact search, and checks every built-in's validity. */
    void judge(String what, Random r, Node node, SchedulingView v, int k, int requiredCount, int[] stats) {
        int[] cands = v.candidates().stream().mapToInt(DeviceState::index).toArray();
        List<Integer> shuffled = new ArrayList<>(Arrays.stream(cands).boxed().toList());
        java.util.Collections.shuffle(shuffled, r);
        List<Integer> required = List.copyOf(shuffled.subList(0, requiredCount));
        GpuRequest.Builder rb = GpuRequest.builder().count(k);
        if (!required.isEmpty()) {
            rb.requiredDevices(required);
        }
        GpuRequest req = rb.build();
        String desc = what + " k=" + k + " required=" + required + " candidates=" + Arrays.toString(cands);
        for (AllocationStrategy s : builtIns()) {
            List<Integer> got = s.select(req, v);
            assertFalse(got.isEmpty(), desc + ": " + s.name() + " declined a feasible request");
            assertValid(desc, s, req, v, got);
        }
        long[] best = exact(node.topology(), cands, new HashSet<>(required), k);
        List<Integer> naive = new ArrayList<>(required);
        for (int c : cands) {
            if (naive.size() < k && !naive.contains(c)) {
                naive.add(c);
            }
        }
        if (setScore(node.topology(), naive) < best[0]) {
            stats[1]++; // the naive answer is beaten: this try can tell a search from no search
        }
        List<Integer> set = AllocationStrategies.byName("topology").select(req, v);
        assertEquals(best[0], setScore(node.topology(), set), desc + ": topology gave " + set);
        List<Integer> rem = AllocationStrategies.byName("topology-remaining").select(req, v);
        assertEquals(best[1], remainingValue(node.topology(), cands, rem), desc + ": topology-remaining gave " + rem);
        stats[0]++;
    }

    // ---------------------------------------------------------------- attacks

    @Test
    void unstructuredNodesUpTo24AgainstBruteForce() {
        Random r = new Random(17);
        int[] stats = new int[2];
        for (int trial = 0; trial < 60; trial++) {
            int n = 17 + r.nextInt(8);
            Node node = randomNode(r, n);
            SchedulingView v = fragmented(r, node, 0.1 * r.nextInt(3), 24);
            int c = v.candidates().size();
            int k = 2 + r.nextInt(Math.min(c / 2, 11) - 1);
            int req = trial % 3 == 0 ? 0 : r.nextInt(Math.min(k, 4));
            judge("unstructured n=" + n + " trial " + trial, r, node, v, k, req, stats);
        }
        assertEquals(60, stats[0]);
        assertTrue(stats[1] > 40, "tries where the naive answer is not optimal: " + stats[1]);
    }

    @Test
    void wideNodeHalfChosenAgainstBruteForce() {
        // every pair distinct, 24 free, k = 12: the largest subset count (2.7 million) this search can afford
        Random r = new Random(4242);
        int[] stats = new int[2];
        for (int trial = 0; trial < 6; trial++) {
            Node node = randomNode(r, 24);
            SchedulingView v = fragmented(r, node, 0.0, 24);
            judge("wide trial " + trial, r, node, v, 10 + r.nextInt(3), trial % 2 == 0 ? 0 : 2, stats);
        }
        assertEquals(6, stats[0]);
        assertTrue(stats[1] >= 5, "tries where the naive answer is not optimal: " + stats[1]);
    }

    /** Nearly flat scores (no links, two PCIe levels, 22 to 24 free, k near n/2): weak bounds, many near-ties. */
    static Node flatNode(Random r, int n) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ds.add(device(i, r.nextInt(2)));
        }
        GpuTopology.Builder b = GpuTopology.builder(ds);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                b.pcie(i, j, r.nextBoolean() ? PcieLevel.HOSTBRIDGE : PcieLevel.NODE);
                if (r.nextInt(12) == 0) {
                    b.links(i, j, 1);
                }
            }
        }
        return new Node(ds, b.build());
    }

    @Test
    void nearlyFlatScoresAgainstBruteForce() {
        Random r = new Random(777);
        int[] stats = new int[2];
        for (int trial = 0; trial < 8; trial++) {
            int n = 22 + r.nextInt(3);
            Node node = flatNode(r, n);
            SchedulingView v = fragmented(r, node, 0.0, 24);
            judge("flat n=" + n + " trial " + trial, r, node, v, n / 2 - r.nextInt(3), trial % 2, stats);
        }
        assertEquals(8, stats[0]);
        assertTrue(stats[1] >= 6, "tries where the naive answer is not optimal: " + stats[1]);
    }

    @Test
    void profilesAndPartitionedNodesAgainstBruteForce() {
        Random r = new Random(99);
        int[] stats = new int[2];
        for (String p : List.of("dgx1-v100", "dgx-h100", "mi210-8x", "pcie-4xa10")) {
            Node node = profile(p);
            for (int trial = 0; trial < 40; trial++) {
                SchedulingView v = fragmented(r, node, 0.1 * r.nextInt(6), 24);
                int c = v.candidates().size();
                if (c < 2) {
                    continue;
                }
                int k = 1 + r.nextInt(c);
                judge(p + " trial " + trial, r, node, v, k, r.nextInt(k + 1) % (k + 1), stats);
            }
        }
        for (int trial = 0; trial < 40; trial++) {
            Node node = partitioned(r);
            SchedulingView v = fragmented(r, node, 0.3 + 0.1 * r.nextInt(4), 26);
            int k = 2 + r.nextInt(4);
            judge("parts-64 trial " + trial, r, node, v, k, r.nextInt(3) % k, stats);
        }
        assertTrue(stats[0] > 150, "trials judged: " + stats[0]);
        assertTrue(stats[1] > 30, "tries where the naive answer is not optimal: " + stats[1]);
    }

    /**
     * Packages of {@code per} partitions: partitions of one package are twins (same score to everyone), so the exact
     * optimum is found here by enumerating how many each package gives. {@code intraLinks} 4 is MI300X CPX-like;
     * 0 with an 18-link fabric across packages is MIG-on-NVSwitch-like (partitions of one GPU are the worst pairs).
     */
    static Node packages(Random r, int pkgs, int per, int intraLinks, boolean fabric) {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < pkgs * per; i++) {
            ds.add(device(i, (i / per) * 2 / pkgs));
        }
        GpuTopology.Builder b = GpuTopology.builder(ds);
        int[][] pl = new int[pkgs][pkgs];
        for (int p = 0; p < pkgs; p++) {
            for (int q = p + 1; q < pkgs; q++) {
                pl[p][q] = pl[q][p] = fabric ? 18 : r.nextInt(3);
            }
        }
        for (int i = 0; i < pkgs * per; i++) {
            for (int j = i + 1; j < pkgs * per; j++) {
                int p = i / per;
                int q = j / per;
                if (p == q) {
                    if (intraLinks > 0) {
                        b.links(i, j, intraLinks);
                    }
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else if (pl[p][q] > 0) {
                    b.links(i, j, pl[p][q]);
                }
            }
        }
        return new Node(ds, b.build());
    }

    /** Exact {SET, SET+REMAINING} by counts per package (partitions of a package are twins). */
    static long[] exactByPackage(GpuTopology t, int pkgs, int per, int[] free, int[] req, int k) {
        long[][] w = new long[pkgs][pkgs];
        for (int p = 0; p < pkgs; p++) {
            for (int q = 0; q < pkgs; q++) {
                int a = p * per;
                int b = p == q ? p * per + 1 : q * per;
                w[p][q] = 100L * t.linkCount(a, b) + pcieTerm(t.pcieLevel(a, b));
            }
        }
        long[] best = {Long.MIN_VALUE, Long.MIN_VALUE};
        byPackage(w, pkgs, free, req, k, 0, new int[pkgs], best);
        return best;
    }

    private static long groupScore(long[][] w, int[] c) {
        long s = 0;
        for (int p = 0; p < c.length; p++) {
            s += w[p][p] * c[p] * (c[p] - 1L) / 2;
            for (int q = p + 1; q < c.length; q++) {
                s += w[p][q] * c[p] * (long) c[q];
            }
        }
        return s;
    }

    private static void byPackage(long[][] w, int pkgs, int[] free, int[] req, int left, int p, int[] c,
            long[] best) {
        if (p == pkgs) {
            if (left == 0) {
                int[] rest = new int[pkgs];
                for (int i = 0; i < pkgs; i++) {
                    rest[i] = free[i] - c[i];
                }
                long set = groupScore(w, c);
                best[0] = Math.max(best[0], set);
                best[1] = Math.max(best[1], set + groupScore(w, rest));
            }
            return;
        }
        for (int n = req[p]; n <= Math.min(free[p], left); n++) {
            c[p] = n;
            byPackage(w, pkgs, free, req, left - n, p + 1, c, best);
        }
        c[p] = 0;
    }

    @Test
    void partitionNodesUpTo64AgainstExactCounts() {
        Random r = new Random(64);
        int judged = 0;
        int beaten = 0;
        for (int trial = 0; trial < 120; trial++) {
            boolean mig = trial % 2 == 1;
            int pkgs = 8;
            int per = mig ? 7 : 8;
            Node node = mig ? packages(r, pkgs, per, 0, true) : packages(r, pkgs, per, 4, false);
            SchedulingView v = fragmented(r, node, 0.1 * r.nextInt(8), pkgs * per);
            int[] cands = v.candidates().stream().mapToInt(DeviceState::index).toArray();
            if (cands.length < 3) {
                continue;
            }
            int k = 2 + r.nextInt(Math.min(cands.length - 1, 16));
            List<Integer> shuffled = new ArrayList<>(Arrays.stream(cands).boxed().toList());
            java.util.Collections.shuffle(shuffled, r);
            List<Integer> required =
                    List.copyOf(shuffled.subList(0, trial % 3 == 0 ? 0 : 1 + r.nextInt(Math.min(3, k))));
            int[] free = new int[pkgs];
            int[] req = new int[pkgs];
            for (int c : cands) {
                free[c / per]++;
            }
            for (int c : required) {
                req[c / per]++;
            }
            GpuRequest.Builder rb = GpuRequest.builder().count(k);
            if (!required.isEmpty()) {
                rb.requiredDevices(required);
            }
            GpuRequest request = rb.build();
            String desc = (mig ? "mig-56" : "cpx-64") + " trial " + trial + " k=" + k + " required=" + required
                    + " candidates=" + Arrays.toString(cands);
            long[] best = exactByPackage(node.topology(), pkgs, per, free, req, k);
            for (AllocationStrategy s : builtIns()) {
                assertValid(desc, s, request, v, s.select(request, v));
            }
            List<Integer> set = AllocationStrategies.byName("topology").select(request, v);
            assertEquals(best[0], setScore(node.topology(), set), desc + ": topology gave " + set);
            List<Integer> rem = AllocationStrategies.byName("topology-remaining").select(request, v);
            assertEquals(best[1], remainingValue(node.topology(), cands, rem),
                    desc + ": topology-remaining gave " + rem);
            List<Integer> naive = new ArrayList<>(required);
            for (int c : cands) {
                if (naive.size() < k && !naive.contains(c)) {
                    naive.add(c);
                }
            }
            if (setScore(node.topology(), naive) < best[0]) {
                beaten++;
            }
            judged++;
        }
        assertTrue(judged > 100, "judged " + judged);
        assertTrue(beaten > 40, "tries where the naive answer is not optimal: " + beaten);
    }

    @Test
    void countEqualToRequiredReturnsExactlyThem() {
        Node node = profile("dgx1-v100");
        Random r = new Random(5);
        SchedulingView v = fragmented(r, node, 0.0, 8);
        GpuRequest req = GpuRequest.builder().count(3).requiredDevices(1, 6, 3).build();
        for (AllocationStrategy s : builtIns()) {
            assertEquals(Set.of(1, 3, 6), new HashSet<>(s.select(req, v)), s.name());
        }
    }

    @Test
    void requiredDeviceNotACandidateIsDeclined() {
        Node node = profile("dgx1-v100");
        List<DeviceState> states = new ArrayList<>();
        List<DeviceState> cands = new ArrayList<>();
        for (GpuDevice d : node.devices()) {
            DeviceState s = DeviceState.idle(d, d.index() == 2 ? GpuHealth.unhealthy("x") : GpuHealth.HEALTHY);
            states.add(s);
            if (d.index() != 2) {
                cands.add(s);
            }
        }
        SchedulingView v = view(node, states, cands);
        for (int missing : List.of(2, 8, 60000)) {
            GpuRequest req = GpuRequest.builder().count(2).requiredDevices(missing).build();
            for (AllocationStrategy s : builtIns()) {
                assertEquals(List.of(), s.select(req, v), s.name() + " must decline required " + missing);
            }
        }
    }

    @Test
    void preferredNumaAndSharedRequestsKeepRequired() {
        Node node = profile("dgx-h100");
        Random r = new Random(8);
        for (int trial = 0; trial < 50; trial++) {
            SchedulingView v = fragmented(r, node, 0.1 * r.nextInt(5), 8);
            List<Integer> idx = new ArrayList<>(v.candidates().stream().map(DeviceState::index).toList());
            if (idx.size() < 2) {
                continue;
            }
            java.util.Collections.shuffle(idx, r);
            int k = 1 + r.nextInt(idx.size());
            GpuRequest.Builder b =
                    GpuRequest.builder().count(k).requiredDevices(idx.get(0)).preferredNuma(r.nextInt(2));
            if (r.nextBoolean()) {
                b.shared(MemorySize.parse("4GB"));
            }
            if (r.nextInt(3) > 0) {
                b.hint(r.nextBoolean() ? io.gpusched.core.WorkloadHint.TRAINING
                        : io.gpusched.core.WorkloadHint.INFERENCE);
            }
            GpuRequest req = b.build();
            for (AllocationStrategy s : builtIns()) {
                assertValid("numa/shared trial " + trial, s, req, v, s.select(req, v));
            }
        }
    }

    /** Indices 0 and 60000: nothing may be sized by the largest index squared (14 GB of ints). */
    @Test
    void sparseIndicesAllocateLittle() {
        List<GpuDevice> ds = List.of(device(0, 0), device(60000, 0));
        GpuTopology t = GpuTopology.builder(ds).links(0, 60000, 2).build();
        Node node = new Node(ds, t);
        List<DeviceState> states = ds.stream().map(d -> DeviceState.idle(d, GpuHealth.HEALTHY)).toList();
        SchedulingView v = view(node, states, states);
        var mx = (com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().getId();
        for (AllocationStrategy s : builtIns()) {
            for (GpuRequest req : List.of(GpuRequest.builder().count(2).build(),
                    GpuRequest.builder().count(2).requiredDevices(60000).build(),
                    GpuRequest.builder().count(1).requiredDevices(60000).build())) {
                long before = mx.getThreadAllocatedBytes(tid);
                List<Integer> got = s.select(req, v);
                long used = mx.getThreadAllocatedBytes(tid) - before;
                assertValid("sparse", s, req, v, got);
                assertTrue(used < 64L << 20, s.name() + " allocated " + used + " bytes for 2 devices");
            }
        }
    }

    /** 256 devices, every pair distinct: the search must be bounded and still return a valid, good set. */
    @Test
    void hugeUnstructuredNodeIsBoundedAndValid() {
        Random r = new Random(256);
        Node node = randomNode(r, 256);
        SchedulingView v = fragmented(r, node, 0.0, 256);
        for (int k : List.of(2, 128)) {
            GpuRequest req = GpuRequest.builder().count(k).requiredDevices(7, 200).build();
            for (AllocationStrategy s : builtIns()) {
                assertValid("huge k=" + k, s, req, v, s.select(req, v));
            }
            // never worse than the naive answer (required, then candidate order)
            List<Integer> naive = new ArrayList<>(List.of(7, 200));
            for (DeviceState c : v.candidates()) {
                if (naive.size() < k && !naive.contains(c.index())) {
                    naive.add(c.index());
                }
            }
            List<Integer> got = AllocationStrategies.byName("topology").select(req, v);
            assertTrue(setScore(node.topology(), got) >= setScore(node.topology(), naive),
                    "k=" + k + " topology " + setScore(node.topology(), got) + " < naive "
                            + setScore(node.topology(), naive));
        }
    }

    /** 256 partitions, 32 packages x 8: structured, must be exact where twins make it tractable. */
    @Test
    void hugePartitionedNodeIsValid() {
        List<GpuDevice> ds = new ArrayList<>();
        for (int i = 0; i < 256; i++) {
            ds.add(device(i, i / 128));
        }
        GpuTopology.Builder b = GpuTopology.builder(ds);
        for (int i = 0; i < 256; i++) {
            for (int j = i + 1; j < 256; j++) {
                if (i / 8 == j / 8) {
                    b.links(i, j, 4);
                }
            }
        }
        Node node = new Node(ds, b.build());
        Random r = new Random(3);
        SchedulingView v = fragmented(r, node, 0.5, 256);
        for (int k : List.of(3, 8, 20, 100)) {
            GpuRequest req = GpuRequest.builder().count(k).build();
            for (AllocationStrategy s : builtIns()) {
                assertValid("parts-256 k=" + k, s, req, v, s.select(req, v));
            }
        }
    }

    // ---------------------------------------------------------------- thermal

    static DeviceState withTemp(GpuDevice d, double temp, double util, Instant at) {
        GpuMetrics m = new GpuMetrics(d.index(), OptionalDouble.of(util), Optional.empty(), OptionalDouble.of(temp),
                OptionalDouble.empty(), at);
        return new DeviceState(d, GpuHealth.HEALTHY, Optional.empty(), 0, MemorySize.ZERO, Optional.of(m),
                DeviceState.Pool.IN_POOL, Optional.empty(), Optional.empty());
    }

    static int thermalPick(double t0, double t1, Instant at0, Instant at1) {
        List<GpuDevice> ds = List.of(device(0, 0), device(1, 0));
        Node node = new Node(ds, GpuTopology.builder(ds).build());
        List<DeviceState> states = List.of(withTemp(ds.get(0), t0, 0, at0), withTemp(ds.get(1), t1, 0, at1));
        AllocationStrategy s = AllocationStrategies.thermalAware(AllocationStrategies.topologyAware(),
                Duration.ofSeconds(30));
        return s.select(GpuRequest.builder().count(1).build(), view(node, states, states)).get(0);
    }

    @Test
    void thermalToleranceIsADifferenceNotABand() {
        // within 5 °C: candidate order decides, wherever the values sit
        assertEquals(0, thermalPick(45.0, 44.0, NOW, NOW), "45 vs 44 is within tolerance");
        assertEquals(0, thermalPick(49.9, 45.0, NOW, NOW), "49.9 vs 45 is within tolerance");
        // beyond 5 °C: the cooler one
        assertEquals(1, thermalPick(50.5, 45.0, NOW, NOW), "50.5 vs 45 exceeds tolerance");
        assertEquals(0, thermalPick(44.0, 50.5, NOW, NOW), "44 vs 50.5 exceeds tolerance");
    }

    @Test
    void staleMetricsAreIgnored() {
        Instant stale = NOW.minusSeconds(31);
        assertEquals(0, thermalPick(90.0, 30.0, stale, stale), "both stale: candidate order");
        assertEquals(1, thermalPick(90.0, 30.0, NOW.minusSeconds(30), NOW.minusSeconds(30)),
                "exactly max age old is not older than max age");
        assertEquals(1, thermalPick(90.0, 30.0, NOW, NOW), "fresh: the cooler one");
    }

    @Test
    void duplicatedOrNegativeRequiredAreRefusedAtBuild() {
        assertThrows(IllegalArgumentException.class, () -> GpuRequest.builder().count(2).requiredDevices(1, 1).build());
        assertThrows(IllegalArgumentException.class, () -> GpuRequest.builder().count(2).requiredDevices(-1).build());
        assertThrows(IllegalArgumentException.class, () -> GpuRequest.builder().count(1).requiredDevices(1, 2).build());
    }
}
