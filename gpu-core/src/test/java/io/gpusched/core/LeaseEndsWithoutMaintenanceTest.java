package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.ManualClock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 2: leases end with no maintenance thread in any process. Two schedulers on one node ledger (each as a
 * process of the node would open it, with {@code maintenanceInterval(ZERO)}) and the lock-free view agree on what an
 * expired lease means: made with {@code release_on_expiry}, it is over for whoever looks next (the ledger records the
 * release with cause {@code EXPIRED} in that reader's transaction, checked by the independent {@link LedgerReader});
 * made without, it stays held and every status marks it expired.
 */
class LeaseEndsWithoutMaintenanceTest {
    @TempDir
    Path dir;

    final ManualClock clock = new ManualClock(Instant.parse("2026-03-01T00:00:00Z"));
    final List<AllocationEvent> events = new CopyOnWriteArrayList<>();

    GpuScheduler open(boolean releaseOnExpiry) {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).stateDir(dir).clock(clock)
                .config(GpuConfig.builder().releaseOnExpiry(releaseOnExpiry).build()).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).listener(events::add).build();
    }

    @Test
    void aLeaseMadeToEndIsEndedByAnotherProcessThatDoesNotAskForIt() throws Exception {
        String id;
        try (GpuScheduler maker = open(true)) {
            id = maker.allocate(GpuRequest.builder().count(4).maxDuration(Duration.ofSeconds(30)).build()).id();
        }
        assertThat(Files.readString(dir.resolve("ledger"), StandardCharsets.UTF_8)).contains("\"expiry\":\"release\"");
        try (GpuScheduler other = open(false)) { // its own config says nothing about leases
            assertThatThrownBy(() -> other.allocate(GpuRequest.builder().count(1).build()))
                    .isInstanceOf(GpuAllocationException.class).hasMessageContaining(id);
            clock.advance(Duration.ofSeconds(31));
            assertThat(NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10"), clock).allocations())
                    .as("the lock-free view agrees before any writer has recorded the release").isEmpty();
            Allocation four = other.allocate(GpuRequest.builder().count(4).build());
            assertThat(four.devices()).hasSize(4);
            assertThat(events.stream().filter(e -> e.allocationId().equals(Optional.of(id)))
                    .map(AllocationEvent::type)).containsSubsequence(AllocationEvent.Type.EXPIRED,
                            AllocationEvent.Type.RELEASED);
        }
        LedgerReader r = LedgerReader.read(dir);
        assertThat(r.ended).anySatisfy(e -> {
            assertThat(e.id()).isEqualTo(id);
            assertThat(e.cause()).isEqualTo("EXPIRED");
        });
    }

    @Test
    void statusAndTheViewAgreeWithTheAllocationPathOnALeaseThatDoesNotEndItsAllocation() throws Exception {
        String id;
        try (GpuScheduler maker = open(false)) {
            id = maker.allocate(GpuRequest.builder().count(4).maxDuration(Duration.ofSeconds(30)).build()).id();
        }
        clock.advance(Duration.ofSeconds(31));
        try (GpuScheduler other = open(false)) {
            assertThatThrownBy(() -> other.allocate(GpuRequest.builder().count(1).build()))
                    .as("held until released or renewed").isInstanceOf(GpuAllocationException.class);
            SchedulerStatus.Held h = other.status().allocations().get(0);
            assertThat(h.id()).isEqualTo(id);
            assertThat(h.expired()).isTrue();
            assertThat(other.statusJson()).contains("\"expired\" : true");
            assertThat(NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10"), clock).allocations())
                    .extracting(Allocation::id).containsExactly(id);
            assertThat(other.renew(id, Duration.ofMinutes(1)).expiresAt()).isPresent();
            assertThat(other.status().allocations().get(0).expired()).isFalse();
        }
        clock.advance(Duration.ofMinutes(2));
        try (GpuScheduler ending = open(true)) { // a process whose config ends leases ends this one too
            assertThat(ending.allocate(GpuRequest.builder().count(4).build()).devices()).hasSize(4);
        }
    }

    @Test
    void inMemoryLeasesEndOnTheNextChangeToo() {
        try (GpuScheduler s = GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).clock(clock)
                .config(GpuConfig.builder().releaseOnExpiry(true).build()).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            s.allocate(GpuRequest.builder().count(4).maxDuration(Duration.ofSeconds(5)).build());
            clock.advance(Duration.ofSeconds(6));
            assertThat(s.allocate(GpuRequest.builder().count(4).build()).devices()).hasSize(4);
        }
    }
}
