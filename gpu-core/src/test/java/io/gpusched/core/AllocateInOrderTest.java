package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link GpuScheduler#allocateInOrder}: requests granted in the order given, each on the state the ones before it
 * leave, up to the first refusal (nothing after it, even one that would fit), all in one ledger transaction (one
 * forced append, counted by the ledger's own statistics; order and contents read back from the file by the
 * independent {@link LedgerReader}).
 */
class AllocateInOrderTest {

    @TempDir
    Path state;

    private GpuScheduler scheduler(GpuInventory inv, GpuConfig config) {
        return GpuScheduler.builder().inventory(inv).stateDir(state).config(config).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static GpuRequest gpus(String owner, int count) {
        return GpuRequest.builder().count(count).owner(owner).build();
    }

    private static GpuRequest pinned(String owner, Integer... gpus) {
        return GpuRequest.builder().deviceIndices(Arrays.asList(gpus)).owner(owner).build();
    }

    private long forces(GpuScheduler s) {
        return s.ledgerStatistics().orElseThrow().forces();
    }

    private long records(GpuScheduler s) {
        return s.ledgerStatistics().orElseThrow().records();
    }

    @Test
    void grantsInOrderUpToTheFirstRefusalInOneForcedAppend() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv,
                GpuConfig.defaults())) {
            List<String> held = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                held.add(s.allocate(pinned("holder", i)).id());
            }
            long f = forces(s);
            long r = records(s);
            // 3 GPUs free: a and b fit, c (2 GPUs) does not once they hold theirs; d would fit but comes after c
            List<Allocation> got = s.allocateInOrder(List.of(gpus("a", 1), gpus("b", 1), gpus("c", 2), gpus("d", 1)));
            assertThat(got).extracting(a -> a.owner().orElseThrow()).containsExactly("a", "b");
            assertEquals(f + 1, forces(s), "two grants: one forced append");
            assertEquals(r + 2, records(s));
            assertThat(got.get(0).deviceIndices()).doesNotContainAnyElementsOf(got.get(1).deviceIndices());
            assertThat(s.allocations()).extracting(a -> a.owner().orElseThrow()).doesNotContain("c", "d");
            // the file, read by its documented format: the holders, then a, then b (in the order asked)
            LedgerReader file = LedgerReader.read(state);
            List<String> order = new ArrayList<>(file.live.keySet());
            assertThat(order.subList(0, 5)).containsExactlyElementsOf(held);
            assertThat(order.subList(5, order.size())).containsExactly(got.get(0).id(), got.get(1).id());
            assertThat(file.live.get(got.get(1).id()).uuids()).containsExactlyInAnyOrderElementsOf(
                    got.get(1).deviceUuids());
            assertThat(file.doubleGrants).isEmpty();
            // another process of the node sees both grants
            try (GpuInventory inv2 = GpuInventories.simulated("dgx1-v100"); GpuScheduler other = scheduler(inv2,
                    GpuConfig.defaults())) {
                assertThat(other.allocations()).extracting(Allocation::id).endsWith(got.get(0).id(),
                        got.get(1).id());
            }
        }
    }

    @Test
    void eachIsDecidedOnTheStateTheOnesBeforeItLeave() throws Exception {
        GpuConfig quota = GpuConfig.builder().users(new UserQuotas(0, Map.of("alice", 2), Map.of())).build();
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv, quota)) {
            // the second wants the GPU the first just took: refused, and what follows is not tried
            List<Allocation> got = s.allocateInOrder(List.of(pinned("bob", 3), pinned("carol", 3), gpus("dave", 1)));
            assertThat(got).extracting(a -> a.owner().orElseThrow()).containsExactly("bob");
            // alice's quota counts the grants made before in the same transaction
            got = s.allocateInOrder(List.of(gpus("alice", 1), gpus("alice", 1), gpus("alice", 1), gpus("eve", 1)));
            assertThat(got).extracting(a -> a.owner().orElseThrow()).containsExactly("alice", "alice");
            assertThat(LedgerReader.read(state).peakGpusByOwner.get("owner:alice")).isEqualTo(2);
        }
    }

    @Test
    void aRefusedFirstRequestRefusesTheWholeAndWritesNothing() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv,
                GpuConfig.defaults())) {
            s.allocate(gpus("holder", 7));
            byte[] before = Files.readAllBytes(state.resolve("ledger"));
            long f = forces(s);
            assertThatThrownBy(() -> s.allocateInOrder(List.of(gpus("a", 2), gpus("b", 1))))
                    .isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertEquals(Reason.INSUFFICIENT_GPUS, ((GpuAllocationException) e).reason()));
            assertThat(Files.readAllBytes(state.resolve("ledger"))).as("the ledger file is as it was")
                    .isEqualTo(before);
            assertEquals(f, forces(s), "nothing forced");
            assertThat(s.allocations()).hasSize(1);
        }
    }

    @Test
    void inMemoryEmptyAndNull() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            assertThat(s.allocateInOrder(List.of())).isEmpty();
            List<Allocation> got = s.allocateInOrder(List.of(gpus("a", 4), gpus("b", 4), gpus("c", 1)));
            assertThat(got).extracting(a -> a.owner().orElseThrow()).containsExactly("a", "b");
            assertThat(s.allocations()).hasSize(2);
            assertThatThrownBy(() -> s.allocateInOrder(null)).isInstanceOf(NullPointerException.class);
            assertThatThrownBy(() -> s.allocateInOrder(Arrays.asList(gpus("a", 1), null)))
                    .isInstanceOf(NullPointerException.class);
            assertThat(s.allocations()).as("nothing granted for a list with a null").hasSize(2);
        }
    }
}
