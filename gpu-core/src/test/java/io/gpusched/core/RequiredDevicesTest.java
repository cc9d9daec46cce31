package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Must-include devices, through hand-built views (no scheduler): every built-in strategy keeps them. */
class RequiredDevicesTest {

    static final GpuInventory DGX1 = GpuInventories.simulated("dgx1-v100");

    static Stream<AllocationStrategy> builtIns() {
        return Stream.concat(AllocationStrategies.names().stream().map(AllocationStrategies::byName),
                Stream.of(AllocationStrategies.thermalAware(AllocationStrategies.packing(), Duration.ofSeconds(30))));
    }

    static GpuRequest request(int count, Integer... required) {
        return GpuRequest.builder().count(count).requiredDevices(required).build();
    }

    @ParameterizedTest
    @MethodSource("builtIns")
    void everyBuiltInReturnsTheRequiredDevicesAndTheCount(AllocationStrategy s) {
        Random rnd = new Random(5);
        for (int tr = 0; tr < 200; tr++) {
            Set<Integer> busy = new HashSet<>();
            int nBusy = rnd.nextInt(5);
            while (busy.size() < nBusy) {
                busy.add(rnd.nextInt(8));
            }
            List<Integer> free = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                if (!busy.contains(i)) {
                    free.add(i);
                }
            }
            int k = 1 + rnd.nextInt(free.size());
            List<Integer> req = new ArrayList<>();
            int r = 1 + rnd.nextInt(k);
            while (req.size() < r) {
                int d = free.get(rnd.nextInt(free.size()));
                if (!req.contains(d)) {
                    req.add(d);
                }
            }
            SchedulingView view = StrategyFakes.view(DGX1.devices(), DGX1.topology(), busy);
            List<Integer> got = s.select(GpuRequest.builder().count(k).requiredDevices(req).build(), view);
            assertThat(got).as("%s: k %d required %s busy %s", s.name(), k, req, busy).hasSize(k)
                    .doesNotHaveDuplicates().containsAll(req).allSatisfy(i -> assertThat(free).contains(i));
        }
    }

    @ParameterizedTest
    @MethodSource("builtIns")
    void aRequiredDeviceThatIsNotACandidateDeclines(AllocationStrategy s) {
        SchedulingView view = StrategyFakes.view(DGX1.devices(), DGX1.topology(), Set.of(3));
        assertThat(s.select(request(2, 3), view)).as(s.name()).isEmpty();
    }

    @Test
    void topologyAddsTheDevicesBestConnectedToTheRequiredOnes() {
        SchedulingView view = StrategyFakes.view(DGX1.devices(), DGX1.topology(), Set.of());
        // 4-7: two NVLinks over one host bridge (230), beating 4-0 (two NVLinks across sockets, 210) and the
        // one-link partners 5 (150) and 6 (130); the best pair of the empty node overall is not near 4 at all
        assertThat(AllocationStrategies.topologyAware().select(request(2, 4), view)).containsExactly(4, 7);
        assertThat(AllocationStrategies.topologyAware().select(request(2, 1), view)).containsExactly(1, 2);
        // three around 4 and 7: 6 has links to both (4-6 one, 6-7 two) and shares their host bridge
        assertThat(AllocationStrategies.topologyAware().select(request(3, 4, 7), view)).containsExactly(4, 6, 7);
        // packing grows its cluster from the required device too
        assertThat(AllocationStrategies.packing().select(request(2, 4), view)).containsExactly(4, 7);
    }

    @Test
    void remainingObjectiveLeavesALinkedPairOnADgx1() {
        // free [0,2,4,5]: SET takes the strongest pair 0-4 (two NVLinks) and leaves 2-5 with no NVLink;
        // REMAINING takes 4-5 and leaves 0-2 linked, as go-gpuallocator's best-effort policy does
        SchedulingView view = StrategyFakes.view(DGX1.devices(), DGX1.topology(), Set.of(1, 3, 6, 7));
        GpuRequest two = GpuRequest.builder().count(2).build();
        assertThat(AllocationStrategies.byName("topology").select(two, view)).containsExactly(0, 4);
        assertThat(AllocationStrategies.byName("topology-remaining").select(two, view)).containsExactly(4, 5);
        assertThat(DGX1.topology().linkCount(0, 2)).isPositive();
        assertThat(DGX1.topology().linkCount(2, 5)).isZero();
        assertThat(AllocationStrategies.byName("topology-remaining").name()).isEqualTo("topology-remaining");
        assertThat(((TopologyAwareStrategy) AllocationStrategies.byName("topology-remaining")).objective())
                .isEqualTo(TopologyAwareStrategy.Objective.REMAINING);
    }

    @Test
    void sparseDeviceIndicesDoNotSizeAnything() {
        List<GpuDevice> devices = List.of(
                GpuDevice.builder().index(0).uuid("GPU-a").vendor(GpuVendor.NVIDIA).name("X")
                        .memory(MemorySize.ofGibibytes(16)).pciBusId("b0").numaNode(0).minor(0).build(),
                GpuDevice.builder().index(60000).uuid("GPU-b").vendor(GpuVendor.NVIDIA).name("X")
                        .memory(MemorySize.ofGibibytes(16)).pciBusId("b1").numaNode(0).minor(1).build());
        GpuTopology t = GpuTopology.builder(devices).links(0, 60000, 2).build();
        for (AllocationStrategy s : builtIns().toList()) {
            assertThat(s.select(GpuRequest.builder().count(2).build(), StrategyFakes.view(devices, t, Set.of())))
                    .as(s.name()).containsExactlyInAnyOrder(0, 60000);
            assertThat(s.select(request(1, 60000), StrategyFakes.view(devices, t, Set.of()))).containsExactly(60000);
        }
    }
}
