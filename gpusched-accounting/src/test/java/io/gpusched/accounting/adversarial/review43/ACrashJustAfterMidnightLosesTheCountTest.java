package io.gpusched.accounting.adversarial.review43;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.io.UncheckedIOException;
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
 * "A crash loses at most one checkpoint interval of the count and never makes the policy act sooner" (0e86d5f3). The
 * first sweep after UTC midnight writes the open interval's part up to midnight at once (each interval lies within one
 * day), idle at its end; IdleStatus takes only a count written at or after the stretch's last idle interval's end, and
 * every count so far was written at a checkpoint before midnight. A sampler killed after that sweep and before the
 * next checkpoint (up to a checkpoint interval every night) is restarted with no usable count, and its policy
 * re-derives the count from the intervals: each sweep that came minutes late counted 90 s where the running policy
 * counted 30 s. Five such sweeps earlier in the stretch, and the restarted policy warns at its second sweep, more than
 * 2 minutes before the sampler that was not killed.
 */
class ACrashJustAfterMidnightLosesTheCountTest {
    @TempDir
    Path dir;

    private static final Instant EVENING = Instant.parse("2026-03-02T23:30:00Z");

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(15), Duration.ofMinutes(25), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    /** The same sweeps for both nodes, up to 00:00:02: 12 min 32 s counted by the policy. */
    private static AccountingNode node(Path dir) {
        AccountingNode node = new AccountingNode(dir, settings());
        node.clock.set(EVENING);
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sweep(); // a checkpoint
        node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        List<IdleAction> steps = new ArrayList<>();
        for (int block = 0; block < 5; block++) {
            steps.addAll(node.run(Duration.ofSeconds(10), 6)); // the 6th: a checkpoint
            steps.addAll(node.run(Duration.ofSeconds(240), 1)); // late, under the jump bound: counted 30 s
        }
        steps.addAll(node.run(Duration.ofSeconds(15), 1)); // 23:55:15
        steps.addAll(node.run(Duration.ofSeconds(10), 28)); // 23:59:55; checkpoints at 23:56:05, ..., 23:59:05
        steps.addAll(node.run(Duration.ofSeconds(7), 1)); // 00:00:02: across midnight, 57 s after the checkpoint
        assertThat(node.clock.instant()).isEqualTo(Instant.parse("2026-03-03T00:00:02Z"));
        assertThat(steps).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED);
        return node;
    }

    private static Instant warned(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    @Test
    void aKillAfterTheFirstSweepPastMidnightWarnsNoSoonerThanTheSamplerThatRan() {
        Instant control;
        try (AccountingNode node = node(dir.resolve("control"))) {
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 30 && warned(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            control = warned(steps);
        }
        assertThat(control).isEqualTo(Instant.parse("2026-03-03T00:02:32Z")); // 15 min counted
        List<IdleAction> after = new ArrayList<>();
        try (AccountingNode node = node(dir.resolve("node"))) {
            // kill -9 at 00:00:03: the journals as they are; the next sampler sweeps at 00:00:12, 00:00:22, ...
            Path crashed = dir.resolve("crashed").resolve(AccountingStore.DIR);
            copy(node.store.directory(), crashed);
            node.scheduler.removeListener(node.sampler);
            node.clock.advance(Duration.ofSeconds(10));
            try (AccountingSampler next = AccountingSampler.open(AccountingStore.at(crashed.getParent()),
                    settings(), node.inventory, node.attribution, new HostIdleEffects(node.scheduler), node.clock)
                    .orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                for (int i = 0; i < 30 && warned(after) == null; i++) {
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                }
                node.scheduler.removeListener(next);
            }
        }
        assertThat(warned(after)).as("killed at 00:00:03, 57 s after the stretch's last checkpoint (and its count):"
                + " the restarted policy loses at most that much of the count and warns no sooner than the sampler"
                + " that was not killed (%s); its steps:%s", control, after).isNotNull().isAfterOrEqualTo(control);
    }

    private static void copy(Path from, Path to) {
        try {
            Files.createDirectories(to);
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(from, "*.{log,sum}")) {
                for (Path p : ds) {
                    Files.copy(p, to.resolve(p.getFileName()));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
