package io.gpusched.accounting.adversarial.review50;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "The store": a restarted sampler "reads back to the last checkpoint marker, continues every
 * allocation from the end of its last interval (nothing is counted twice)"; "Not sampled": a clock that is ahead when
 * the sampler starts (an RTC at boot, stepped back by NTP later) "records its lead as held time once".
 *
 * <p>AccountingStore.recover reads the newest day file that has a checkpoint marker and the file before it, and stops
 * there. A node booted with its RTC two and a half days ahead writes markers into two future days' journals (its
 * clock crosses a midnight there); NTP then steps the clock back to the true time and the sampler goes on. Bob's
 * allocation, granted after the step back, has all its records in today's journal. At the next (planned) restart,
 * recover finds the markers in the future days, reads those two files only and never sees bob's records: his
 * allocation is not continued but started over from its grant, and the 10 minutes already on record are written again
 * (a second grant record, a gap from the grant). Every allocation granted after the step back is counted twice at
 * every restart until the true time reaches the future day the clock once wrote (a 30-day-ahead RTC: for a month).
 */
class ARestartAfterTheClockCameBackFromDaysAheadCountsNewAllocationsTwiceTest {
    @TempDir
    Path dir;

    private static final Instant TRUE_TIME = Instant.parse("2026-03-02T11:00:00Z");
    private static final Instant RTC = Instant.parse("2026-03-04T23:55:00Z");

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(30), Duration.ofMinutes(60), Duration.ofMinutes(90), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    @Test
    void anAllocationGrantedAfterTheStepBackIsContinuedNotCountedAgainFromItsGrant() {
        try (AccountingNode node = new AccountingNode(dir, settings())) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.stopSampler();
            node.clock.set(RTC); // the node boots with its RTC ahead
            node.startSampler();
            node.sweep();
            node.run(Duration.ofSeconds(10), 60); // 23:55 to 00:05 of the RTC's days: markers on both
            node.clock.set(TRUE_TIME); // NTP steps the clock back
            node.sweep();
            Allocation b = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            node.run(Duration.ofSeconds(10), 60); // held 10 minutes, checkpointed every minute
            node.restartSampler(); // a planned restart
            node.run(Duration.ofSeconds(10), 30); // 5 more minutes
            node.stopSampler();
            AllocationUsage u = AllocationUsage.find(node.store, b.id()).orElseThrow();
            node.startSampler(); // the node's close() closes a sampler
            long wall = Duration.ofMinutes(15).toMillis(); // grant to the last sweep, by the (true) clock
            assertThat(u.total().heldMillis()).as("bob's allocation, granted at %s after the clock came back from"
                    + " %s, held 15 minutes with a planned restart after 10: expected %s ms of GPU time (nothing"
                    + " counted twice), records: %s", TRUE_TIME, RTC, wall, u).isEqualTo(wall);
        }
    }
}
