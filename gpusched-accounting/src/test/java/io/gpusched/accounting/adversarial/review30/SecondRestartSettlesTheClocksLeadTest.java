package io.gpusched.accounting.adversarial.review30;

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
 * review28's RestartUnderAClockAheadTest with a second restart: the node boots with the RTC an hour ahead, and the
 * operator, seeing the wrong time, stops the console, fixes the clock, and starts it again (or systemd restarts the
 * console while chrony is still stepping the clock). fix28 writes a held-back gap "in full at a planned stop"
 * (AccountingSampler.close: {@code meter.settlePending()}), so the hour the clock was ahead is written as held time
 * at the first stop, and can never be taken back: alice's 12-minute allocation is recorded with more than an hour of
 * GPU time ("GPU-seconds never exceed wall time x GPUs held", issue 34). The stop knows no more about the clock than
 * the crash, which loses the gap; writing it in full is the one choice that can count time that never passed.
 *
 * <p><b>Judged</b> (fix30, docs/ACCOUNTING.md "Not sampled"): a restart's gap is measured by the wall clock and written
 * at the first sweep (fix28's hold-back, which waited for the clock to be known, lost the gap in a crash, counted
 * time twice and dropped the counter's energy: review30, and was reverted). A clock that is ahead when the sampler
 * starts records its lead once; a later step back cannot take it back (the store is append-only). The mitigation is
 * real, not in this code: the shipped unit starts the service {@code After=time-sync.target} (with a wait unit
 * enabled, on a synchronized clock). This test asserts the documented behaviour: the lead is recorded once, never
 * twice, and the GPU time recorded is at most the time the stepped clock read from the grant to the release.
 */
@Tag("adversarial")
class SecondRestartSettlesTheClocksLeadTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void aSecondRestartAfterTheClockWasFixedRecordsTheClocksLeadOnceAndNoMore() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 30); // 5 min
            node.stopSampler(); // a reboot
            Instant trueTime = node.clock.instant().plusSeconds(30);
            Duration lead = Duration.ofHours(1);
            node.clock.set(trueTime.plus(lead)); // the RTC reads an hour ahead at boot
            node.startSampler();
            node.run(Duration.ofSeconds(10), 6); // a minute
            node.stopSampler(); // the console is stopped to fix the clock
            node.clock.set(trueTime.plusSeconds(90)); // the true time
            node.startSampler();
            node.run(Duration.ofSeconds(10), 30);
            node.scheduler.release(a.id());
            Instant released = node.clock.instant();

            AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
            Duration ledger = Duration.between(a.createdAt(), released);
            assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for alice's 1 GPU; the ledger"
                    + " says granted %s, released %s (%s); the clock's lead %s is recorded once, never twice; %s",
                    a.createdAt(), released, ledger, lead, u.verdict())
                    .isGreaterThanOrEqualTo(lead)
                    .isLessThanOrEqualTo(ledger.plus(lead).plusMinutes(2));
        }
    }
}
