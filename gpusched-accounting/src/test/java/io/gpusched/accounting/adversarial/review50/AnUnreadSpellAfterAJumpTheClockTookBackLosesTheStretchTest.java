package io.gpusched.accounting.adversarial.review50;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Idle allocations": nor is a sweep that measured nothing for the allocation (the meter recorded
 * the time up to it as a gap: the clock jumped ahead and came back), or in which no GPU of it read busy while one could
 * not be read, busy again: "the meter keeps its idle start too, however long such sweeps last (review38)"; a killed
 * sampler never warns "twice in one stretch"; status shows "the policy's last step of that idle stretch".
 *
 * <p>Alice's idle GPU is flagged and warned. The wall clock jumps 11 minutes ahead for one sweep (skipped) and comes
 * back; the sweep that comes back and the next one cannot read the GPU's utilization (a driver that answers none after
 * a VM resume), then it reads 0 % again. The policy keeps its state throughout (warned, one stretch). The meter does
 * not: UsageMeter.gap drops the idle start, and the sweep that closes the gap keeps none when it reads nothing
 * (only a restarted meter's first sweep takes the idle start back: resumedIdle), so the next idle sweep starts a new
 * idle start at the unread sweep, past the gap's end, and the store's stretch begins there. Status then shows alice
 * idle for a minute with no warning; and a sampler killed after the next checkpoint is continued from that new start:
 * the next one flags alice again and warns her a second time in the same stretch.
 */
class AnUnreadSpellAfterAJumpTheClockTookBackLosesTheStretchTest {
    @TempDir
    Path dir;

    /** window 2 min, warn_after 4, act_after 30, grace 8; checkpoints every minute. */
    private static AccountingSettings settings() {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(1)).withIdle(new IdlePolicy(1,
                Duration.ofMinutes(2), Duration.ofMinutes(4), Duration.ofMinutes(30), IdlePolicy.Action.RELEASE,
                "TERM", Duration.ofMinutes(8), List.of(), false, List.of()));
    }

    private static GpuMetrics unread(GpuMetrics m) {
        return new GpuMetrics(m.index(), OptionalDouble.empty(), m.memoryUsed(), m.temperatureCelsius(),
                m.powerWatts(), m.sampledAt(), m.energyMillijoules());
    }

    /**
     * @param status gets the store's status of alice's allocation 80 s after the unread sweeps (after a checkpoint)
     * @return the policy's steps over the play
     */
    private static List<IdleAction> play(Path dir, boolean kill, List<IdleStatus> status) {
        AccountingSettings settings = settings();
        List<IdleAction> all = new ArrayList<>();
        try (AccountingNode node = new AccountingNode(dir, settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 0)); // 0 % throughout
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            all.addAll(node.run(Duration.ofSeconds(10), 36)); // idle 6 min: flagged, warned; P = T0 + 6 min
            all.addAll(node.run(Duration.ofMinutes(11), 1)); // the clock jumps 11 min ahead: a sweep skipped
            node.clock.advance(Duration.ofMinutes(-11).plusSeconds(10)); // and comes back: P + 10 s
            all.addAll(node.sweepWith(0, AnUnreadSpellAfterAJumpTheClockTookBackLosesTheStretchTest::unread));
            node.clock.advance(Duration.ofSeconds(10)); // P + 20 s: still unread
            all.addAll(node.sweepWith(0, AnUnreadSpellAfterAJumpTheClockTookBackLosesTheStretchTest::unread));
            all.addAll(node.run(Duration.ofSeconds(10), 8)); // 0 % again, to P + 100 s (a checkpoint at P + 70 s)
            status.add(IdleStatus.read(node.sampler.store(), node.clock.instant()).get(a.id()));
            if (kill) { // kill -9 now; the next sampler sweeps when the one that ran on would, 10 s later
                AccountingStore copy = node.killedCopy(dir.resolve("killed"));
                node.scheduler.removeListener(node.sampler);
                node.sampler = AccountingSampler.open(copy, settings, node.inventory, node.attribution,
                        new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
                node.scheduler.addListener(node.sampler);
                node.sampler.knownLive(node.scheduler.allocations());
            }
            all.addAll(node.run(Duration.ofSeconds(10), 6 * 10)); // 10 more minutes at 0 %
        }
        return all;
    }

    private static long warnings(List<IdleAction> steps) {
        return steps.stream().filter(a -> a.action() == IdleStep.WARNED).count();
    }

    @Test
    void statusStillShowsTheWarningOfTheStretchThePolicyContinues() {
        List<IdleStatus> status = new ArrayList<>();
        List<IdleAction> steps = play(dir.resolve("ran-on"), false, status);
        assertThat(warnings(steps)).as("the policy warns once: %s", steps).isEqualTo(1);
        assertThat(status.get(0)).as("alice idle and warned, the clock jumped 11 min ahead for one sweep and came"
                + " back, the GPU unread at two sweeps, then 0 %% again; the policy keeps her stretch and its"
                + " warning (%s): expected status to list her as warned, idle since before the jump; status: %s",
                steps, status.get(0)).isNotNull();
        assertThat(status.get(0).lastStep()).as("status of alice: %s; the policy's steps: %s", status.get(0), steps)
                .contains(IdleStep.WARNED);
    }

    @Test
    void aKilledSamplerDoesNotWarnAgainInTheSameStretch() {
        List<IdleAction> ranOn = play(dir.resolve("ran-on"), false, new ArrayList<>());
        assertThat(warnings(ranOn)).as("the sampler that ran on warns once: %s", ranOn).isEqualTo(1);
        List<IdleAction> killed = play(dir.resolve("killed"), true, new ArrayList<>());
        assertThat(warnings(killed)).as("alice idle and warned, the clock jumped 11 min ahead for one sweep and came"
                + " back, the GPU unread at that sweep and the next, then 0 %% again; the sampler killed 80 s later"
                + " (after a checkpoint) and continued 10 s after: expected one warning in the stretch, as the"
                + " sampler that ran on gives (%s); the killed run's steps: %s", ranOn, killed)
                .isEqualTo(1);
    }
}
