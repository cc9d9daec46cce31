package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Retention ages days by the store's own days: a sampler started under a clock far ahead of the store (an RTC booted
 * into the future) deletes nothing it could not have aged out, while a sampler started at a sane time still deletes
 * days older than {@code gpu.accounting.retention}.
 */
@Tag("adversarial")
class RestartClockRetentionTest {
    @TempDir
    Path dir;

    @Test
    void aSamplerStartedUnderAFarFutureClockDeletesNothing() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(a.id());
            node.stopSampler();
            node.clock.set(AccountingNode.T0.plus(Duration.ofDays(401))); // the node boots with its RTC a year ahead
            node.startSampler();
            node.run(Duration.ofSeconds(10), 3);
            assertThat(AllocationUsage.find(node.store, a.id())).as("alice's allocation of T0").isPresent();
        }
    }

    @Test
    void aSamplerStartedAtASaneTimeStillDeletesDaysOlderThanRetention() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.clock.set(AccountingNode.T0.minus(Duration.ofDays(401)));
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation old = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("old").build());
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(old.id());
            node.stopSampler();
            node.clock.set(AccountingNode.T0.minus(Duration.ofHours(1)));
            node.startSampler();
            node.sweep();
            Allocation recent = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("new")
                    .build());
            node.run(Duration.ofMinutes(1), 5);
            node.scheduler.release(recent.id());
            node.stopSampler(); // restarted the same day: the store's newest day is today's
            node.clock.set(AccountingNode.T0);
            node.startSampler();
            node.run(Duration.ofSeconds(10), 3);
            LocalDate oldDay = LocalDate.ofInstant(old.createdAt(), ZoneOffset.UTC);
            assertThat(node.store.days()).as("days kept").doesNotContain(oldDay);
            assertThat(AllocationUsage.find(node.store, old.id())).as("401 days old").isEmpty();
            assertThat(AllocationUsage.find(node.store, recent.id())).as("an hour old").isPresent();
        }
    }
}
