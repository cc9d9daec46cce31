package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

import io.gpusched.core.DeviceState.Pool;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Placement's one-pass candidate filter and its pick check against an oracle written here from the rules alone (not
 * from Placement's code): random nodes with every kind of state (held, shared, draining, quarantined, sick, unknown
 * memory, other vendors and models) and random requests. The oracle decides which devices a request may use; Placement
 * must return exactly those, in node order, or refuse exactly when the oracle says the request cannot be placed.
 */
class PlacementOracleTest {
    private static final String[] NAMES = {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X",
        "Tesla V100"};

    @Test
    void candidatesAreExactlyWhatTheRulesAllowOrARefusal() {
        Random rnd = new Random(20261122L);
        int granted = 0;
        int refused = 0;
        for (int round = 0; round < 20_000; round++) {
            List<DeviceState> node = node(rnd);
            GpuRequest r = request(rnd, node.size());
            List<DeviceState> expected = new ArrayList<>();
            for (DeviceState d : node) {
                if (usable(r, d)) {
                    expected.add(d);
                }
            }
            Set<Integer> eligibleIdx = new HashSet<>();
            expected.forEach(d -> eligibleIdx.add(d.index()));
            boolean placeable = r.count() <= node.size() && expected.size() >= r.count()
                    && eligibleIdx.containsAll(r.requiredDevices());
            if (placeable) {
                assertThat(Placement.candidates(r, node)).as("round %d: %s", round, r.describe())
                        .containsExactlyElementsOf(expected);
                granted++;
            } else {
                assertThatThrownBy(() -> Placement.candidates(r, node)).as("round %d: %s", round, r.describe())
                        .isInstanceOf(GpuAllocationException.class);
                refused++;
            }
        }
        assertThat(granted).as("the corpus exercises both outcomes").isGreaterThan(2_000);
        assertThat(refused).isGreaterThan(2_000);
    }

    @Test
    void aPickIsTakenExactlyWhenItIsDistinctEligibleCompleteAndIncludesTheRequired() {
        Random rnd = new Random(7L);
        int accepted = 0;
        int rejected = 0;
        for (int round = 0; round < 20_000; round++) {
            List<DeviceState> node = node(rnd);
            GpuRequest r = request(rnd, node.size());
            List<DeviceState> cands;
            try {
                cands = Placement.candidates(r, node);
            } catch (GpuAllocationException e) {
                continue;
            }
            List<Integer> pick = pick(rnd, r, cands, node);
            Set<Integer> eligible = new HashSet<>();
            cands.forEach(d -> eligible.add(d.index()));
            boolean valid = pick.size() == r.count() && new HashSet<>(pick).size() == pick.size()
                    && !pick.contains(null) && eligible.containsAll(pick) && pick.containsAll(r.requiredDevices());
            Placement p = new Placement(strategy(pick), GpuTopology.unconnected(devicesOf(node)));
            if (pick.isEmpty()) { // the documented way for a strategy to decline
                assertThatThrownBy(() -> p.place(r, node, Instant.EPOCH)).isInstanceOf(GpuAllocationException.class)
                        .extracting(e -> ((GpuAllocationException) e).reason())
                        .isEqualTo(GpuAllocationException.Reason.NO_PLACEMENT);
            } else if (valid) {
                List<GpuDevice> got = p.place(r, node, Instant.EPOCH);
                assertThat(got).extracting(GpuDevice::index).as("round %d", round).containsExactlyElementsOf(pick);
                accepted++;
            } else {
                try {
                    p.place(r, node, Instant.EPOCH);
                    fail("round " + round + ": the invalid pick " + pick + " of " + r.describe() + " was taken");
                } catch (GpuAllocationException e) {
                    fail("round " + round + ": an invalid pick is a strategy bug, not a refusal: " + e.getMessage());
                } catch (GpuException e) {
                    assertThat(e.getMessage()).contains("a bug in the strategy");
                }
                rejected++;
            }
        }
        assertThat(accepted).isGreaterThan(1_000);
        assertThat(rejected).isGreaterThan(1_000);
    }

    /** The rules, written from the documentation of each constraint. */
    private static boolean usable(GpuRequest r, DeviceState d) {
        GpuDevice g = d.device();
        if (d.pool() != Pool.IN_POOL || d.health().state() != GpuHealth.State.HEALTHY) {
            return false;
        }
        if (r.vendor().isPresent() && r.vendor().get() != g.vendor()) {
            return false;
        }
        if (r.modelPattern().isPresent()) {
            String core = r.modelPattern().get().replace("*", "").toUpperCase(Locale.ROOT);
            if (!g.name().toUpperCase(Locale.ROOT).contains(core)) {
                return false;
            }
        }
        if (r.minComputeCapability().isPresent()) {
            if (g.computeCapability().isEmpty()) {
                return false;
            }
            ComputeCapability have = g.computeCapability().get();
            ComputeCapability want = r.minComputeCapability().get();
            if (have.major() < want.major() || (have.major() == want.major() && have.minor() < want.minor())) {
                return false;
            }
        }
        long need = Math.max(r.minMemory().map(MemorySize::bytes).orElse(0L),
                r.sharedMemory().map(MemorySize::bytes).orElse(0L));
        boolean constrained = r.minMemory().isPresent() || r.sharedMemory().isPresent();
        if (!g.memoryKnown() ? constrained : g.memory().bytes() < need) {
            return false;
        }
        if (r.sharing() == SharingMode.EXCLUSIVE) {
            return d.exclusiveHolder().isEmpty() && d.sharedHolders() == 0;
        }
        return d.exclusiveHolder().isEmpty()
                && g.memory().bytes() - d.sharedReserved().bytes() >= r.sharedMemory().get().bytes();
    }

    private static List<DeviceState> node(Random rnd) {
        int n = 1 + rnd.nextInt(12);
        List<DeviceState> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            GpuDevice.Builder b = GpuDevice.builder().index(i * 2 + rnd.nextInt(2)).uuid("GPU-" + round(rnd) + "-" + i)
                    .name(NAMES[rnd.nextInt(NAMES.length)]);
            String name = NAMES[rnd.nextInt(NAMES.length)];
            b.name(name).vendor(name.startsWith("AMD") ? GpuVendor.AMD : GpuVendor.NVIDIA);
            if (rnd.nextInt(8) == 0) {
                b.memoryUnknown();
            } else {
                b.memory(MemorySize.ofGibibytes(16L << rnd.nextInt(3)));
            }
            if (rnd.nextBoolean()) {
                b.computeCapability(new ComputeCapability(7 + rnd.nextInt(3), rnd.nextInt(2) * 5));
            }
            GpuDevice g = b.pciBusId(String.format("0000:%02x:00.0", i + 1)).build();
            GpuHealth h = switch (rnd.nextInt(10)) {
                case 0 -> GpuHealth.unhealthy("xid 48");
                case 1 -> GpuHealth.lost("fell off the bus");
                default -> GpuHealth.HEALTHY;
            };
            DeviceState s = DeviceState.idle(g, h);
            switch (rnd.nextInt(6)) {
                case 0 -> s = s.withExclusive(Optional.of("a-" + i));
                case 1 -> {
                    if (g.memoryKnown()) {
                        s = s.withShared(1 + rnd.nextInt(2), MemorySize.ofGibibytes(1 + rnd.nextInt(14)));
                    }
                }
                default -> {}
            }
            switch (rnd.nextInt(12)) {
                case 0 -> s = s.withPool(Pool.DRAINING, Optional.of("exiting"), Optional.of(Instant.EPOCH));
                case 1 -> s = s.withPool(Pool.QUARANTINED, Optional.of("kept processes"), Optional.of(Instant.EPOCH));
                default -> {}
            }
            out.add(s);
        }
        return out;
    }

    private static int round(Random rnd) {
        return rnd.nextInt(1 << 20);
    }

    private static GpuRequest request(Random rnd, int n) {
        GpuRequest.Builder b = GpuRequest.builder().count(1 + rnd.nextInt(Math.min(n + 1, 6)));
        switch (rnd.nextInt(8)) {
            case 0 -> b.vendor(rnd.nextBoolean() ? GpuVendor.AMD : GpuVendor.NVIDIA);
            case 1 -> b.modelPattern(rnd.nextBoolean() ? "*a100*" : "*H100*");
            case 2 -> b.minComputeCapability(new ComputeCapability(8, rnd.nextInt(2) * 5));
            case 3 -> b.minMemory(MemorySize.ofGibibytes(8L << rnd.nextInt(4)));
            default -> {}
        }
        if (rnd.nextInt(4) == 0) {
            b.shared(MemorySize.ofGibibytes(1 + rnd.nextInt(20)));
        }
        GpuRequest draft = b.build();
        if (rnd.nextInt(3) == 0 && draft.count() > 0) {
            List<Integer> req = new ArrayList<>();
            int k = 1 + rnd.nextInt(draft.count());
            for (int i = 0; i < k; i++) {
                int idx = rnd.nextInt(2 * n + 2); // some are not on the node
                if (!req.contains(idx)) {
                    req.add(idx);
                }
            }
            b.requiredDevices(req);
        }
        return b.build();
    }

    private static List<Integer> pick(Random rnd, GpuRequest r, List<DeviceState> cands, List<DeviceState> node) {
        List<Integer> out = new ArrayList<>(r.requiredDevices());
        List<DeviceState> pool = new ArrayList<>(cands);
        java.util.Collections.shuffle(pool, rnd);
        for (DeviceState d : pool) {
            if (out.size() < r.count() && !out.contains(d.index())) {
                out.add(d.index());
            }
        }
        switch (rnd.nextInt(7)) {
            case 0 -> out.remove(out.size() - 1); // one short
            case 1 -> out.add(cands.get(rnd.nextInt(cands.size())).index()); // one too many or a duplicate
            case 2 -> out.set(rnd.nextInt(out.size()), node.get(rnd.nextInt(node.size())).index()); // maybe not free
            case 3 -> out.set(rnd.nextInt(out.size()), null);
            case 4 -> out.set(rnd.nextInt(out.size()), 999);
            default -> {}
        }
        return out;
    }

    private static AllocationStrategy strategy(List<Integer> pick) {
        return new AllocationStrategy() {
            @Override
            public String name() {
                return "rigged";
            }

            @Override
            public List<Integer> select(GpuRequest r, SchedulingView view) {
                return pick;
            }
        };
    }

    private static List<GpuDevice> devicesOf(List<DeviceState> node) {
        return node.stream().map(DeviceState::device).toList();
    }
}
