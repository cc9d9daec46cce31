package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.ProcessAttribution;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link UsageMeter#allTrackedLive} answers from the last sweep while the live allocations and the tracks stay the
 * same: a track added or removed since (a skipped sweep, an allocation ended by its event) makes it look again, so an
 * allocation tracked but not listed is always found.
 */
class UsageMeterLiveCheckTest {
    @TempDir
    Path dir;

    @Test
    void aTrackAddedOrEndedSinceTheLastSweepIsSeenWithTheSameLiveAllocations() {
        try (ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults())) {
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            Allocation b = node.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            UsageMeter meter = new UsageMeter(5, ProcessAttribution.none());
            List<Allocation> onlyA = List.of(a);
            meter.observe(node.clock.instant(), node.inventory.sample(), onlyA, d -> Optional.empty());
            node.clock.advance(Duration.ofSeconds(1));
            meter.observe(node.clock.instant(), node.inventory.sample(), onlyA, d -> Optional.empty());
            assertThat(meter.allTrackedLive(onlyA)).as("the same allocations, the same tracks").isTrue();

            // a sweep skipped (the clock jumped) tracks b from its grant; a is listed alone again after it
            node.clock.advance(Duration.ofHours(1));
            meter.skip(node.clock.instant(), node.inventory.sample(), List.of(a, b));
            assertThat(meter.allTrackedLive(onlyA)).as("b is tracked and not in the list").isFalse();
            assertThat(meter.endVanished(Set.of(a.id()))).extracting(AccountingRecord.Interval::allocationId)
                    .containsExactly(b.id());
            assertThat(meter.allTrackedLive(onlyA)).isTrue();

            // the same list after a's end by its event: nothing tracked is missing from it
            meter.end(a.id(), node.clock.instant(), "RELEASED");
            assertThat(meter.allTrackedLive(onlyA)).isTrue();
            assertThat(meter.tracked()).isEmpty();
        }
    }
}
