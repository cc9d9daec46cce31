package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.strategy.PairScore;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class TopologyStrategyTest {

    static GpuScheduler topo(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).strategy(AllocationStrategies.topologyAware()).auditLogging(false)
                .maintenanceInterval(java.time.Duration.ZERO).build();
    }

    static long score(GpuTopology t, List<Integer> set) {
        return PairScore.ofSet(t, set);
    }

    /** Best score over every k-subset of the free devices: the reference. */
    static long exhaustive(GpuTopology t, List<Integer> free, int k) {
        long[] best = {-1};
        combos(free, k, 0, new ArrayList<>(), c -> best[0] = Math.max(best[0], score(t, c)));
        return best[0];
    }

    static void combos(List<Integer> from, int k, int start, List<Integer> cur, java.util.function.Consumer<List<Integer>> f) {
        if (cur.size() == k) {
            f.accept(cur);
            return;
        }
        for (int i = start; i <= from.size() - (k - cur.size()); i++) {
            cur.add(from.get(i));
            combos(from, k, i + 1, cur, f);
            cur.remove(cur.size() - 1);
        }
    }

    static SimulatedGpuInventory randomNode(long seed, int n) {
        Random rnd = new Random(seed);
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("rand-" + seed);
        for (int i = 0; i < n; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-r-" + i).vendor(GpuVendor.NVIDIA).name("X")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("b" + i).numaNode(rnd.nextInt(2)).minor(i).build());
        }
        PcieLevel[] levels = PcieLevel.values();
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                if (rnd.nextInt(3) == 0) {
                    b.links(i, j, 1 + rnd.nextInt(4));
                }
                b.pcie(i, j, levels[1 + rnd.nextInt(levels.length - 1)]);
            }
        }
        return b.build();
    }

    @Property(tries = 150)
    void sameScoreAsExhaustiveSearch(@ForAll @LongRange(min = 1, max = 1_000_000) long seed,
                                     @ForAll @IntRange(min = 2, max = 16) int n,
                                     @ForAll @IntRange(min = 1, max = 6) int k,
                                     @ForAll @IntRange(min = 0, max = 8) int busy) {
        SimulatedGpuInventory inv = randomNode(seed, n);
        GpuScheduler s = topo(inv);
        Random rnd = new Random(seed * 31);
        for (int i = 0; i < Math.min(busy, n - 1); i++) {
            s.tryAllocate(GpuRequest.builder().deviceIndices(rnd.nextInt(n)).build());
        }
        List<Integer> free = s.devices().stream().filter(DeviceState::isIdle).map(DeviceState::index).toList();
        if (free.size() < k) {
            return;
        }
        Allocation a = s.allocate(GpuRequest.builder().count(k).build());
        assertThat(score(inv.topology(), a.deviceIndices())).as("seed %d n %d k %d", seed, n, k)
                .isEqualTo(exhaustive(inv.topology(), free, k));
    }

    @Test
    void oneGpuTakesTheOneWhosePartnerIsBusy() {
        GpuScheduler s = topo(GpuInventories.simulated("dgx1-v100"));
        s.allocate(GpuRequests.fromCliFlags("--devices=0"));
        Allocation one = s.allocate(GpuRequest.builder().build());
        GpuTopology t = s.inventory().topology();
        int took = one.deviceIndices().get(0);
        assertThat(t.linkCount(0, took)).as("takes a partner of the busy GPU 0, keeping intact pairs").isPositive();
        Allocation four = s.allocate(GpuRequest.builder().count(4).build());
        assertThat(four.deviceIndices()).containsExactlyInAnyOrder(4, 5, 6, 7);
    }

    @Test
    void numaPreferenceAndExplicitIdsAreHonoured() {
        GpuScheduler s = topo(GpuInventories.simulated("dgx1-v100"));
        Allocation a = s.allocate(GpuRequest.builder().count(2).preferredNuma(1).build());
        assertThat(a.deviceIndices()).allSatisfy(i -> assertThat(i).isGreaterThanOrEqualTo(4));
        Allocation b = s.allocate(GpuRequests.fromCliFlags("--devices=3,0"));
        assertThat(b.deviceIndices()).containsExactly(3, 0);
    }

    @Test
    void sharedRequestsPreferSharedGpus() {
        GpuScheduler s = topo(GpuInventories.simulated("pcie-4xa10"));
        Allocation first = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        Allocation second = s.allocate(GpuRequests.fromCliFlags("--shared=4GB"));
        assertThat(second.deviceIndices()).isEqualTo(first.deviceIndices());
    }

    @Test
    void largePoolsUseTheHeuristicAndStillFindLinkedSets() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("64-part");
        for (int i = 0; i < 64; i++) {
            b.device(GpuDevice.builder().index(i).uuid("MIG-" + i).vendor(GpuVendor.NVIDIA).name("A100 MIG 1g.10gb")
                    .memory(MemorySize.ofGibibytes(10)).pciBusId("b" + (i / 8)).numaNode(i / 32).minor(i / 8)
                    .parentUuid("GPU-" + (i / 8)).build());
        }
        for (int i = 0; i < 64; i++) {
            for (int j = i + 1; j < 64; j++) {
                if (i / 8 == j / 8) {
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else if (i / 16 == j / 16) {
                    b.links(i, j, 12);
                }
            }
        }
        GpuScheduler s = topo(b.build());
        Allocation a = s.allocate(GpuRequest.builder().count(16).build());
        assertThat(a.deviceIndices().stream().map(i -> i / 16).distinct()).as("one NVLink pair of GPUs").hasSize(1);
    }
}
