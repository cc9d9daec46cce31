package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link GpuScheduler#releaseEachThenAllocateInOrder}: the releases, each on its own, then the requests in order on the
 * state they leave, all in one ledger transaction (one forced append, counted by the ledger's own statistics; what was
 * released and granted read back from the file by the independent {@link LedgerReader}).
 */
class ReleaseEachThenAllocateInOrderTest {

    @TempDir
    Path state;

    private GpuScheduler scheduler(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static GpuRequest gpus(String owner, int count) {
        return GpuRequest.builder().count(count).owner(owner).build();
    }

    private static long forces(GpuScheduler s) {
        return s.ledgerStatistics().orElseThrow().forces();
    }

    @Test
    void releasesAndTheGrantsTheyMakePossibleAreOneForcedAppend() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            List<String> held = new ArrayList<>();
            for (int i = 0; i < 8; i++) { // the node is full
                held.add(s.allocate(gpus("holder", 1)).id());
            }
            long f = forces(s);
            long r = s.ledgerStatistics().orElseThrow().records();
            // two GPUs come free: a and b get them; c finds none, and d (which would not fit either) is not tried
            ReleasesAndGrants done = s.releaseEachThenAllocateInOrder(List.of(held.get(2), held.get(5)),
                    List.of(gpus("a", 1), gpus("b", 1), gpus("c", 1), gpus("d", 1)));
            assertThat(done.releases()).extracting(ReleasesAndGrants.Release::released).containsExactly(true, true);
            assertThat(done.grants()).extracting(a -> a.owner().orElseThrow()).containsExactly("a", "b");
            assertThat(done.refusal()).get().isInstanceOfSatisfying(GpuAllocationException.class,
                    e -> assertEquals(Reason.INSUFFICIENT_GPUS, e.reason()));
            assertEquals(f + 1, forces(s), "two releases and two grants: one forced append");
            assertEquals(r + 4, s.ledgerStatistics().orElseThrow().records());
            List<Integer> freed = new ArrayList<>();
            for (Allocation a : done.grants()) {
                freed.addAll(a.deviceIndices());
            }
            assertThat(freed).containsExactlyInAnyOrder(2, 5);
            LedgerReader file = LedgerReader.read(state);
            assertThat(file.ended).extracting(LedgerReader.Ended::id).containsExactly(held.get(2), held.get(5));
            assertThat(file.ended).extracting(LedgerReader.Ended::cause).containsOnly("RELEASED");
            assertThat(new ArrayList<>(file.live.keySet()).subList(6, 8)).containsExactly(done.grants().get(0).id(),
                    done.grants().get(1).id());
            assertThat(file.doubleGrants).isEmpty();
        }
    }

    @Test
    void aRefusedReleaseIsReportedAloneAndARefusedFirstRequestStillLetsTheReleasesThrough() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            String a = s.allocate(gpus("holder", 4)).id();
            String b = s.allocate(gpus("holder", 2)).id();
            String gone = s.allocate(gpus("holder", 1)).id();
            assertThat(s.release(gone)).isTrue();
            long f = forces(s);
            // a never-issued id and one released before (and a again, later in the list) do not stop the others;
            // 9 GPUs fit nowhere: nothing granted, the refusal reported, the releases made
            ReleasesAndGrants done = s.releaseEachThenAllocateInOrder(List.of("no-such-id", gone, a, a, b),
                    List.of(gpus("big", 9), gpus("small", 1)));
            assertThat(done.releases()).extracting(ReleasesAndGrants.Release::released)
                    .containsExactly(false, false, true, false, true);
            assertThat(done.releases().get(0).refused()).get().isInstanceOfSatisfying(GpuAllocationException.class,
                    e -> assertEquals(Reason.UNKNOWN_ALLOCATION, e.reason()));
            assertThat(done.releases().subList(1, 5)).allSatisfy(x -> assertThat(x.refused()).isEmpty());
            assertThat(done.grants()).isEmpty();
            assertThat(done.refusal()).get().isInstanceOf(GpuAllocationException.class);
            assertEquals(f + 1, forces(s));
            assertThat(s.allocations()).isEmpty();
            assertThat(LedgerReader.read(state).live).isEmpty();
            // nothing to do: nothing forced
            ReleasesAndGrants none = s.releaseEachThenAllocateInOrder(List.of(), List.of());
            assertThat(none.releases()).isEmpty();
            assertThat(none.grants()).isEmpty();
            assertThat(none.refusal()).isEmpty();
            assertEquals(f + 1, forces(s));
            assertThatThrownBy(() -> s.releaseEachThenAllocateInOrder(Arrays.asList(a, null), List.of()))
                    .isInstanceOf(NullPointerException.class);
        }
    }

    @Test
    void listenersGetTheTransactionsEventsTogetherInOrderAndEachOneStillReachesAPerEventListener() throws Exception {
        List<List<AllocationEvent.Type>> batches = new ArrayList<>();
        List<AllocationEvent.Type> single = new ArrayList<>();
        AllocationListener batched = new AllocationListener() {
            @Override
            public void onEvent(AllocationEvent e) {
                batches.add(List.of(e.type()));
            }

            @Override
            public void onEvents(List<AllocationEvent> events) {
                batches.add(events.stream().map(AllocationEvent::type).toList());
            }
        };
        AllocationListener failing = e -> {
            single.add(e.type());
            throw new IllegalStateException("a listener that fails on every event");
        };
        List<AllocationEvent.Type> afterAnError = new ArrayList<>();
        AllocationListener linkage = e -> {
            afterAnError.add(e.type());
            if (afterAnError.size() == 1) {
                throw new NoClassDefFoundError("com/example/metrics/Counter"); // an optional dependency missing
            }
        };
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            String a = s.allocate(gpus("holder", 1)).id();
            String b = s.allocate(gpus("holder", 1)).id();
            s.addListener(batched);
            s.addListener(failing);
            s.addListener(linkage);
            s.releaseEachThenAllocateInOrder(List.of(a, b), List.of(gpus("x", 1), gpus("y", 1)));
            assertThat(batches).containsExactly(List.of(AllocationEvent.Type.RELEASED, AllocationEvent.Type.RELEASED,
                    AllocationEvent.Type.ALLOCATED, AllocationEvent.Type.ALLOCATED));
            assertThat(single).as("one by one, each despite the failures before it").containsExactly(
                    AllocationEvent.Type.RELEASED, AllocationEvent.Type.RELEASED, AllocationEvent.Type.ALLOCATED,
                    AllocationEvent.Type.ALLOCATED);
            assertThat(afterAnError).as("an Error on the transaction's first event costs it none of the others")
                    .containsExactly(AllocationEvent.Type.RELEASED, AllocationEvent.Type.RELEASED,
                            AllocationEvent.Type.ALLOCATED, AllocationEvent.Type.ALLOCATED);
        }
    }

    @Test
    void withheldGpusGoToNoRequestOfTheCallAndNothingIsRecordedOfThem() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            String held = s.allocate(GpuRequest.builder().requiredDevices(0).owner("holder").build()).id();
            long r = s.ledgerStatistics().orElseThrow().records();
            // GPUs 1-5 kept for a request ahead: 6 and 7 are all there is for these
            ReleasesAndGrants done = s.releaseEachThenAllocateInOrder(List.of(held), List.of(gpus("a", 2),
                    gpus("b", 1)), Set.of(0, 1, 2, 3, 4, 5));
            assertThat(done.releases()).extracting(ReleasesAndGrants.Release::released).containsExactly(true);
            assertThat(done.grants()).hasSize(1);
            assertThat(done.grants().get(0).deviceIndices()).containsExactlyInAnyOrder(6, 7);
            assertThat(done.refusal()).get().isInstanceOfSatisfying(GpuAllocationException.class,
                    e -> assertThat(e.reason().isTransient()).isTrue());
            assertEquals(r + 2, s.ledgerStatistics().orElseThrow().records(), "a release and a grant, nothing else");
            // named, a withheld GPU is refused as busy; the next call without it grants it, and none was drained
            ReleasesAndGrants named = s.releaseEachThenAllocateInOrder(List.of(), List.of(GpuRequest.builder()
                    .deviceIndices(3).owner("c").build()), Set.of(3));
            assertThat(named.grants()).isEmpty();
            assertThat(named.refusal()).get().isInstanceOfSatisfying(GpuAllocationException.class,
                    e -> assertThat(e.getMessage()).contains("owed to a request waiting ahead"));
            assertThat(s.devices()).allMatch(d -> d.pool() == DeviceState.Pool.IN_POOL);
            assertThat(s.releaseEachThenAllocateInOrder(List.of(), List.of(GpuRequest.builder().deviceIndices(3)
                    .owner("c").build()), Set.of()).grants()).hasSize(1);
            assertThat(LedgerReader.read(state).doubleGrants).isEmpty();
        }
    }
}
