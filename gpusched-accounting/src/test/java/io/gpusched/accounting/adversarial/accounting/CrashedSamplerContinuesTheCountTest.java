package io.gpusched.accounting.adversarial.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sampler killed right after a checkpoint: the policy's count written with that checkpoint is what the next one
 * continues from, so nothing of it is lost; without it the count came from the checkpoint intervals, each counted at
 * most 90 s (review42), and a policy with 5-minute checkpoints warned minutes late.
 */
class CrashedSamplerContinuesTheCountTest {
    @TempDir
    Path dir;

    @Test
    void aKillRightAfterACheckpointLosesNothingOfTheCount() throws IOException {
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5))
                .withIdle(new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20),
                        IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
        try (AccountingNode node = new AccountingNode(dir.resolve("node"), settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep(); // a checkpoint: the next comes 5 minutes of sweeps later
            Instant granted = node.clock.instant();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            assertThat(node.run(Duration.ofSeconds(10), 30)).extracting(IdleAction::action)
                    .containsExactly(IdleStep.FLAGGED); // 5 min idle, checkpointed at that sweep
            // kill -9: the journals as they are, no last checkpoint; back 10 s later
            AccountingStore crashed = node.killedCopy(dir.resolve("crashed"));
            node.scheduler.removeListener(node.sampler);
            node.clock.advance(Duration.ofSeconds(10));
            List<IdleAction> after = new ArrayList<>();
            try (AccountingSampler next = AccountingSampler.open(crashed, settings,
                    node.inventory, node.attribution, new HostIdleEffects(node.scheduler), node.clock)
                    .orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                for (int i = 0; i < 42; i++) { // 7 min
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                    if (after.stream().anyMatch(a -> a.action() == IdleStep.WARNED)) {
                        break;
                    }
                }
                node.scheduler.removeListener(next);
            }
            Instant warned = after.stream().filter(a -> a.action() == IdleStep.WARNED).findFirst()
                    .map(IdleAction::at).orElse(null);
            // 5 min counted before the kill, 5 more after: the restart's first sweep counts nothing (20 s, with the
            // 10 s down), so warned at 10 min 20 s of the grant
            assertThat(warned).as("warned at 10 min of idleness as counted, 20 s late for the restart: %s", after)
                    .isEqualTo(granted.plus(Duration.ofMinutes(10).plusSeconds(20)));
        }
    }

    /**
     * Sweeps 5 min of idleness (a checkpoint at its end), then one sweep 4 min late (no checkpoint: the policy counts
     * it 30 s), stops with the clock stepped back {@code back}, restarts: when it warns.
     */
    private static Instant warnedAfterAStop(Path dir, Duration back) {
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5))
                .withIdle(new IdlePolicy(1, Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20),
                        IdlePolicy.Action.RELEASE, "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
            node.sweep();
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
            node.run(Duration.ofSeconds(10), 30);
            node.run(Duration.ofMinutes(4), 1);
            Instant last = node.clock.instant();
            node.clock.set(last.minus(back)); // an NTP step back just before a planned stop
            node.stopSampler();
            node.clock.set(last.plusSeconds(20));
            node.startSampler();
            for (int i = 0; i < 60; i++) {
                for (IdleAction a : node.run(Duration.ofSeconds(10), 1)) {
                    if (a.action() == IdleStep.WARNED) {
                        return a.at();
                    }
                }
            }
            return null;
        }
    }

    @Test
    void aStopOnAClockSteppedBackDatesTheCountByTheLastSweep() {
        Instant steady = warnedAfterAStop(dir.resolve("steady"), Duration.ZERO);
        Instant back = warnedAfterAStop(dir.resolve("back"), Duration.ofSeconds(150));
        // 5 min 30 s counted before the stop; a count dated at the stepped-back clock, 150 s before the interval it
        // goes with ends, had those 150 s counted again from the interval (its late sweep counted in full)
        assertThat(steady).isNotNull();
        assertThat(back).as("warned as after a stop on a steady clock").isEqualTo(steady);
    }
}
