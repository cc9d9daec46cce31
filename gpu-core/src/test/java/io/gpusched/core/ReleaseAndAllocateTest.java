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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link GpuScheduler#releaseAndAllocate}: the releases and the grant are one ledger transaction (one forced append,
 * counted by the ledger's own statistics and read back from the file by {@link LedgerReader}); a refusal of any part
 * leaves the ledger file byte for byte as it was and the old allocations live.
 */
class ReleaseAndAllocateTest {

    @TempDir
    Path state;

    private GpuScheduler scheduler(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).stateDir(state).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static GpuRequest pinned(String job, Integer... gpus) {
        return GpuRequest.builder().deviceIndices(Arrays.asList(gpus)).owner("yarn").jobId(job).build();
    }

    private long forces(GpuScheduler s) {
        return s.ledgerStatistics().orElseThrow().forces();
    }

    private byte[] ledgerBytes() throws Exception {
        return Files.readAllBytes(state.resolve("ledger"));
    }

    @Test
    void theReleasesAndTheGrantAreOneForcedAppend() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            Allocation a = s.allocate(pinned("a", 0, 1));
            Allocation b = s.allocate(pinned("b", 2));
            Allocation keep = s.allocate(pinned("keep", 5));
            long f = forces(s);
            long records = s.ledgerStatistics().orElseThrow().records();
            Allocation c = s.releaseAndAllocate(List.of(a.id(), b.id()), pinned("c", 0, 1, 2));
            assertEquals(f + 1, forces(s), "two releases and a grant: one forced append");
            assertEquals(records + 3, s.ledgerStatistics().orElseThrow().records());
            assertThat(c.deviceIndices()).containsExactlyInAnyOrder(0, 1, 2);
            // the file, read by its documented format: a and b ended, c holds their GPUs, keep untouched
            LedgerReader r = LedgerReader.read(state);
            assertThat(r.live.keySet()).containsExactlyInAnyOrder(keep.id(), c.id());
            assertThat(r.live.get(c.id()).uuids()).containsExactlyInAnyOrderElementsOf(c.deviceUuids());
            assertThat(r.ended).extracting(LedgerReader.Ended::id).containsExactly(a.id(), b.id());
            assertThat(r.ended).extracting(LedgerReader.Ended::cause).containsOnly("RELEASED");
            // another process of the node sees the same
            try (GpuInventory inv2 = GpuInventories.simulated("dgx1-v100"); GpuScheduler other = scheduler(inv2)) {
                assertThat(other.allocations()).extracting(Allocation::id).containsExactly(keep.id(), c.id());
                assertThat(other.release(a.id())).as("an id released in the combined append").isFalse();
                assertThat(other.release(c.id())).as("the new id is one the node issued").isTrue();
            }
        }
    }

    @Test
    void aRefusedGrantReleasesNothing() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            Allocation a = s.allocate(pinned("a", 0));
            Allocation b = s.allocate(pinned("b", 1));
            byte[] before = ledgerBytes();
            long f = forces(s);
            // releasing a frees GPU 0, but GPU 1 is b's: the grant is refused after a's release was decided
            assertThatThrownBy(() -> s.releaseAndAllocate(List.of(a.id()), pinned("c", 0, 1)))
                    .isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertThat(((GpuAllocationException) e).reason().isTransient()).isTrue());
            assertThat(ledgerBytes()).as("the ledger file is as it was").isEqualTo(before);
            assertEquals(f, forces(s), "nothing forced");
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(a.id(), b.id());
            assertThat(LedgerReader.read(state).live.keySet()).containsExactly(a.id(), b.id());
            // and the same call without b in the way goes through
            assertThat(s.releaseAndAllocate(List.of(a.id(), b.id()), pinned("c", 0, 1)).deviceIndices())
                    .containsExactlyInAnyOrder(0, 1);
        }
    }

    @Test
    void anIdTheNodeNeverIssuedRefusesTheWhole() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            Allocation a = s.allocate(pinned("a", 0));
            byte[] before = ledgerBytes();
            assertThatThrownBy(() -> s.releaseAndAllocate(List.of(a.id(), "no-such-7"), pinned("c", 3)))
                    .isInstanceOf(GpuAllocationException.class)
                    .satisfies(e -> assertEquals(Reason.UNKNOWN_ALLOCATION, ((GpuAllocationException) e).reason()))
                    .hasMessageContaining("no-such-7").hasMessageContaining("nothing was released");
            assertThat(ledgerBytes()).isEqualTo(before);
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(a.id());
        }
    }

    @Test
    void anIdReleasedBeforeIsSkippedAndDuplicatesCountOnce() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            Allocation a = s.allocate(pinned("a", 0));
            Allocation b = s.allocate(pinned("b", 1));
            s.release(a.id());
            long records = s.ledgerStatistics().orElseThrow().records();
            Allocation c = s.releaseAndAllocate(List.of(a.id(), b.id(), b.id()), pinned("c", 0, 1));
            assertEquals(records + 2, s.ledgerStatistics().orElseThrow().records(), "b released once, c granted");
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(c.id());
        }
    }

    @Test
    void releaseAllIsOneForcedAppendOrNothing() throws Exception {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100"); GpuScheduler s = scheduler(inv)) {
            Allocation a = s.allocate(pinned("a", 0));
            Allocation b = s.allocate(pinned("b", 1));
            Allocation keep = s.allocate(pinned("keep", 2));
            byte[] before = ledgerBytes();
            assertThatThrownBy(() -> s.releaseAll(List.of(a.id(), "no-such-9")))
                    .isInstanceOf(GpuAllocationException.class).hasMessageContaining("no-such-9");
            assertThat(ledgerBytes()).as("refused: the file is as it was").isEqualTo(before);
            long f = forces(s);
            s.release(b.id());
            assertEquals(1, s.releaseAll(List.of(a.id(), b.id())), "a was live, b released before");
            assertEquals(f + 2, forces(s), "b's release, then one append for the rest");
            assertEquals(0, s.releaseAll(List.of()));
            assertEquals(f + 2, forces(s), "nothing to release: nothing written");
            assertThat(LedgerReader.read(state).live.keySet()).containsExactly(keep.id());
        }
    }

    @Test
    void aPlacedRequestIsDecidedOnTheStateTheReleasesLeave() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            List<Allocation> all = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                all.add(s.allocate(pinned("j" + i, i)));
            }
            // the node is full: only the released GPUs can be placed on (in memory: the same one transaction)
            Allocation c = s.releaseAndAllocate(List.of(all.get(3).id(), all.get(6).id()),
                    GpuRequest.builder().count(2).owner("yarn").build());
            assertThat(c.deviceIndices()).containsExactlyInAnyOrder(3, 6);
            assertThatThrownBy(() -> s.releaseAndAllocate(List.of(all.get(0).id()),
                    GpuRequest.builder().count(2).owner("yarn").build()))
                    .isInstanceOf(GpuAllocationException.class);
            assertThat(s.allocation(all.get(0).id())).as("refused: GPU 0's holder kept it").isPresent();
        }
    }

    @Test
    void badArgumentsAreNamed() {
        try (GpuInventory inv = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            assertThatThrownBy(() -> s.releaseAndAllocate(null, pinned("c", 0)))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("releaseIds");
            assertThatThrownBy(() -> s.releaseAndAllocate(List.of(), null))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("request");
            assertThatThrownBy(() -> s.releaseAndAllocate(Arrays.asList("x", null), pinned("c", 0)))
                    .isInstanceOf(NullPointerException.class).hasMessageContaining("releaseIds");
            assertThat(s.releaseAndAllocate(List.of(), pinned("c", 0)).deviceIndices())
                    .as("nothing to release: a plain allocate").containsExactly(0);
        }
    }
}
