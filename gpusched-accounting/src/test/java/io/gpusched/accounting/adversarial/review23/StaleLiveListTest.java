package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node's tick reads the live allocations and then sweeps (RunSampler: {@code sampler.sweep(inventory.sample(),
 * scheduler.allocations())}; the console's NodeWatcher likewise). A release on another thread (a REST call, the
 * service, the idle policy) can land between the read and the sweep, which waits for the sampler's monitor while the
 * release's record is written. The sweep then gets a list that still holds the released allocation. Issue 34: "a crash
 * loses at most one interval and never counts twice"; docs/ACCOUNTING.md: GPU-seconds are grant to release, exact.
 */
@Tag("adversarial")
class StaleLiveListTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseBetweenTheTicksReadAndItsSweepIsNotCountedAgainFromItsGrant() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 60));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 3); // T0+3m
            node.clock.advance(Duration.ofSeconds(1));
            GpuSample sample = node.inventory.sample(); // the tick reads the GPUs
            List<Allocation> live = node.scheduler.allocations(); // and the live allocations: alice's among them
            node.scheduler.release(a.id()); // another thread releases it now, at T0+3m1s: its last record written
            Instant released = node.clock.instant();
            node.sampler.sweep(sample, live); // the tick's sweep, with what it read
            node.run(Duration.ofMinutes(1), 2);
            node.sampler.checkpoint();

            long ledgerHeld = Duration.ofMinutes(3).plusSeconds(1).toMillis();
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(u.total().heldMillis()).as("GPU-ms recorded for alice's allocation (the ledger held it %d ms,"
                    + " %s to %s); its end %s", ledgerHeld, a.createdAt(), released, u.end())
                    .isLessThanOrEqualTo(ledgerHeld);
            UsageReport r = UsageReport.of(node.store, AccountingNode.T0, node.clock.instant().plusSeconds(1),
                    UsageReport.GroupBy.OWNER);
            assertThat(r.allocations()).as("allocations granted in the period (one was)").isEqualTo(1);
        }
    }
}
