package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An allocation released where the sampler got no event (another process's release it did not see) ends at the last
 * sweep that saw it, marked {@code UNOBSERVED}, even when another allocation took its place between two sweeps, so the
 * node lists as many allocations as the sampler tracks.
 */
class VanishedAllocationTest {
    @TempDir
    Path dir;

    @Test
    void aReleaseNoEventToldIsEndedAtTheLastSweepThatSawItWhenAnotherTookItsPlace() {
        ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)));
        try {
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            Allocation b = node.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            node.run(Duration.ofSeconds(10), 2);
            node.scheduler.removeListener(node.sampler); // the sampler hears of nothing from here on
            node.scheduler.release(a.id());
            Allocation c = node.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
            assertThat(node.scheduler.allocations()).extracting(Allocation::id).containsExactlyInAnyOrder(b.id(),
                    c.id());
            node.run(Duration.ofSeconds(10), 1);

            List<Interval> ofA = node.store.day(AccountingStore.dayOf(ScriptedNode.T0)).stream()
                    .filter(r -> r instanceof Interval iv && iv.allocationId().equals(a.id()))
                    .map(r -> (Interval) r).toList();
            assertThat(ofA).as("intervals of %s: %s", a.id(), ofA).isNotEmpty();
            Interval last = ofA.get(ofA.size() - 1);
            assertThat(last.end()).isEqualTo(Optional.of("UNOBSERVED"));
            assertThat(last.to()).as("its end: the last sweep that saw it").isEqualTo(ScriptedNode.T0.plusSeconds(20));
            assertThat(ofA.stream().mapToLong(iv -> iv.devices().get(0).figures().heldMillis).sum())
                    .as("held from the grant to the last sweep that saw it").isEqualTo(20_000);
            assertThat(ofA).filteredOn(iv -> iv.end().isPresent()).hasSize(1);
            assertThat(node.sampler.store().day(AccountingStore.dayOf(ScriptedNode.T0)).stream()
                    .filter(r -> r instanceof Interval iv && iv.allocationId().equals(b.id()) && iv.end().isPresent()))
                    .as("%s is still live: not ended", b.id()).isEmpty();
        } finally {
            node.close();
        }
    }
}
