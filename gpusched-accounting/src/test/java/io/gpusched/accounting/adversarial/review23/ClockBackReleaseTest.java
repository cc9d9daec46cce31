package io.gpusched.accounting.adversarial.review23;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The mirror image of ClockJumpForwardTest: NTP steps the wall clock back 8 minutes (it had run fast) while an
 * allocation runs, and its holder releases it soon after. The ledger's grant and release are 2 min 10 s apart; the
 * store's checkpoints already hold 10 minutes. docs/ACCOUNTING.md: "GPU-seconds: grant to release, from the ledger's
 * times, per GPU: exact"; issue 34: "GPU-seconds never exceed wall time x GPUs held". UsageMeter.end scales only the
 * open interval back to the release; what earlier checkpoints wrote past it stays, and the record says it was released
 * at 10:10 while the ledger says 10:02:10.
 *
 * <p>Judged (by the lead, who did not write this test): the ledger's grant and release are read from the stepped
 * clock, and 10 minutes and 10 seconds really passed while the allocation was held (the sweeps' own steps); an append-
 * only store cannot take back checkpoints already written. docs/ACCOUNTING.md now says so: across a backward step a
 * record holds the time that passed, at most that, which can exceed the ledger's grant-to-release difference. The test
 * checks that bound, so that a record never holds more than really passed (nothing counted twice).
 */
@Tag("adversarial")
class ClockBackReleaseTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aReleaseAfterTheClockStepsBackRecordsNoMoreThanTheLedgersGrantToRelease() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 50));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 10); // T0+10m by the (fast) clock
            node.clock.set(AccountingNode.T0.plus(Duration.ofMinutes(2))); // NTP steps it back 8 minutes
            node.sweep();
            node.run(Duration.ofSeconds(5), 2);
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();
            long ledgerHeld = Duration.between(a.createdAt(), released).toMillis();
            long passed = Duration.ofMinutes(10).plusSeconds(10).toMillis(); // what the clock was moved forward by
            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            assertThat(u.total().heldMillis()).as("GPU-ms recorded; the ledger: granted %s, released %s (%d ms); the"
                    + " record runs %s to %s; %d ms passed", a.createdAt(), released, ledgerHeld, u.from(), u.to(),
                    passed).isLessThanOrEqualTo(passed).isGreaterThanOrEqualTo(ledgerHeld);
        }
    }
}
