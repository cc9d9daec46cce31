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
import io.gpusched.core.GpuMetrics;
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
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * 0e86d5f3: "An allocation whose last record says idle and that a sweep reads busy gets its interval written at that
 * sweep, before the next checkpoint: a crash no longer leaves the store saying idle after a busy spell". A sweep that
 * crosses UTC midnight cuts the open interval at midnight and writes that part at once; UsageMeter.credit gives it the
 * track's idle start although the sweep read the GPU busy (the idle start is cleared only after the cut), and the
 * turned-busy write is decided before the cut, from the record written before it (busy, or none yet). So an allocation
 * that went idle after its last checkpoint and reads busy at the sweep across midnight leaves a record saying "idle
 * since 23:57 as of 00:00" and nothing after it. Killed before the next checkpoint, the restarted policy continues that
 * stretch through the busy spell: it flags 80 s sooner than the sampler that was not killed (which started over at
 * the busy sweep).
 */
class ABusySweepAcrossMidnightLeavesTheStoreSayingIdleTest {
    @TempDir
    Path dir;

    private static final Instant EVENING = Instant.parse("2026-03-02T23:57:00Z");

    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(20), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics busy(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.of(95), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /** 23:57 checkpoint, granted; idle sweeps every 10 s; the sweep at 00:00:10 reads busy (no checkpoint). */
    private static AccountingNode node(Path dir) {
        AccountingNode node = new AccountingNode(dir, settings());
        node.clock.set(EVENING);
        node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sweep(); // the sampler's first sweep: a checkpoint at 23:57:00; the next is due at 00:02:00
        node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        assertThat(node.run(Duration.ofSeconds(10), 17)).isEmpty(); // idle to 23:59:50
        node.clock.advance(Duration.ofSeconds(20));
        assertThat(node.sweepWith(0, ABusySweepAcrossMidnightLeavesTheStoreSayingIdleTest::busy)).isEmpty();
        return node; // 00:00:10, busy at this sweep
    }

    private static Instant flagged(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.FLAGGED).map(IdleAction::at).findFirst()
                .orElse(null);
    }

    @Test
    void aKillAfterTheBusySweepAcrossMidnightDoesNotCountTheIdleTimeBeforeIt() throws IOException {
        Instant control;
        try (AccountingNode node = node(dir.resolve("control"))) {
            List<IdleAction> steps = new ArrayList<>();
            for (int i = 0; i < 40 && flagged(steps) == null; i++) {
                steps.addAll(node.run(Duration.ofSeconds(10), 1));
            }
            control = flagged(steps);
        }
        // idle again from the busy sweep at 00:00:10: 5 min counted at 00:05:10
        assertThat(control).isEqualTo(Instant.parse("2026-03-03T00:05:10Z"));
        List<IdleAction> after = new ArrayList<>();
        try (AccountingNode node = node(dir.resolve("node"))) {
            // kill -9 at 00:00:15: the journals as they are; back at 00:00:20
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
                for (int i = 0; i < 40 && flagged(after) == null; i++) {
                    node.clock.advance(Duration.ofSeconds(10));
                    after.addAll(next.sweep(node.inventory.sample(), node.scheduler.allocations()));
                }
                node.scheduler.removeListener(next);
            }
        }
        assertThat(flagged(after)).as("GPU 0 read busy at 00:00:10 (after going idle at 23:57, since its last"
                + " checkpoint); the sampler killed at 00:00:15 and restarted at 00:00:20 must not count the idle time"
                + " before that busy sweep: flagged no sooner than %s (the sampler that was not killed). The store"
                + " said idle since 23:57 as of midnight and nothing after; the restarted policy's steps:%s", control,
                after).isAfterOrEqualTo(control);
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
