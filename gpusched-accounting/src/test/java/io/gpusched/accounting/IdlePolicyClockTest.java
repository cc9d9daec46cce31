package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The idle policy against a manual clock, through the real sampler, store and scheduler: flagged, warned, then acted
 * on at the configured times; exempt owners untouched; a dry run acts on nothing; busy again means left alone; every
 * step audited in the store.
 */
class IdlePolicyClockTest {
    @TempDir
    Path dir;
    ScriptedNode node;
    private static final Duration MIN = Duration.ofMinutes(1);

    private IdlePolicy policy(IdlePolicy.Action action, List<String> exempt, boolean dryRun, List<String> hook) {
        return new IdlePolicy(1, Duration.ofMinutes(10), Duration.ofMinutes(20), Duration.ofMinutes(30), action,
                "TERM", Duration.ofMinutes(15), exempt, dryRun, hook);
    }

    private void open(IdlePolicy p) {
        node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5)).withIdle(p));
        node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.trace(1, UsageTrace.of(Duration.ofSeconds(10), 0));
        node.sweep();
    }

    @AfterEach
    void close() {
        if (node != null) {
            node.close();
        }
    }

    /** Sweeps once a minute for {@code minutes}; returns the minute (since start) of each step. */
    private Map<IdleStep, List<Long>> run(int minutes) {
        Map<IdleStep, List<Long>> at = new EnumMap<>(IdleStep.class);
        for (int i = 0; i < minutes; i++) {
            node.clock.advance(MIN);
            for (IdleAction a : node.sweep()) {
                at.computeIfAbsent(a.action(), k -> new ArrayList<>()).add(Duration.between(ScriptedNode.T0,
                        a.at()).toMinutes());
            }
        }
        return at;
    }

    private List<IdleAction> audited() {
        List<IdleAction> out = new ArrayList<>();
        for (var d : node.store.days()) {
            node.store.day(d).forEach(r -> {
                if (r instanceof IdleAction a) {
                    out.add(a);
                }
            });
        }
        return out;
    }

    @Test
    void warnedThenReleasedAtTheConfiguredTimesAndAudited() {
        open(policy(IdlePolicy.Action.RELEASE, List.of(), false, List.of()));
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
        Map<IdleStep, List<Long>> at = run(40);
        assertThat(at.get(IdleStep.FLAGGED)).containsExactly(10L);
        assertThat(at.get(IdleStep.WARNED)).containsExactly(20L);
        assertThat(at.get(IdleStep.RELEASED)).as("act_after 30 min, but grace: 15 min after the warning")
                .containsExactly(35L);
        assertThat(node.scheduler.allocations()).isEmpty();
        assertThat(audited()).extracting(IdleAction::action).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED,
                IdleStep.RELEASED);
        assertThat(node.notices).extracting(IdleNotice::step).containsExactly(IdleStep.FLAGGED, IdleStep.WARNED,
                IdleStep.RELEASED);
        assertThat(node.notices.get(1).message()).contains("released in 15 min");
        AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
        assertThat(u.end()).contains("RELEASED");
        assertThat(u.total().heldMillis()).isEqualTo(35 * 60_000L);
        assertThat(u.total().idleFraction()).hasValue(1.0);
        assertThat(u.idle()).hasSize(3);
    }

    @Test
    void exemptOwnersAreFlaggedButNeverWarnedOrActedOn() {
        open(policy(IdlePolicy.Action.RELEASE, List.of("bob"), false, List.of()));
        node.allocate(GpuRequest.builder().requiredDevices(0).owner("bob").build());
        Map<IdleStep, List<Long>> at = run(60);
        assertThat(at.keySet()).containsExactlyInAnyOrder(IdleStep.FLAGGED, IdleStep.SKIPPED);
        assertThat(node.scheduler.allocations()).hasSize(1);
        assertThat(audited()).filteredOn(x -> x.action() == IdleStep.SKIPPED).singleElement()
                .satisfies(x -> assertThat(x.detail()).contains("exempt"));
    }

    @Test
    void dryRunActsOnNothing() {
        open(policy(IdlePolicy.Action.RELEASE, List.of(), true, List.of("/bin/true")));
        node.allocate(GpuRequest.builder().requiredDevices(0).owner("carol").build());
        Map<IdleStep, List<Long>> at = run(60);
        assertThat(at.get(IdleStep.DRY_RUN)).containsExactly(20L, 35L);
        assertThat(at).doesNotContainKeys(IdleStep.WARNED, IdleStep.RELEASED);
        assertThat(node.scheduler.allocations()).hasSize(1);
        assertThat(node.notices).extracting(IdleNotice::step).containsExactly(IdleStep.FLAGGED);
        assertThat(audited()).filteredOn(x -> x.action() == IdleStep.DRY_RUN).extracting(IdleAction::detail)
                .anySatisfy(d -> assertThat(d).startsWith("dry run: would release"));
    }

    @Test
    void busyAgainMeansLeftAloneAndTheClockStartsOver() {
        open(policy(IdlePolicy.Action.RELEASE, List.of(), false, List.of()));
        node.allocate(GpuRequest.builder().requiredDevices(0).owner("dave").build());
        Map<IdleStep, List<Long>> first = run(25); // flagged at 10, warned at 20
        node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 90));
        Map<IdleStep, List<Long>> busy = run(1);
        node.trace(0, UsageTrace.of(Duration.ofSeconds(10), 0));
        Map<IdleStep, List<Long>> again = run(40);
        assertThat(first.get(IdleStep.WARNED)).containsExactly(20L);
        assertThat(busy.get(IdleStep.BUSY_AGAIN)).containsExactly(26L);
        assertThat(again.get(IdleStep.FLAGGED)).as("idle again from 26 min").containsExactly(36L);
        assertThat(again.get(IdleStep.WARNED)).containsExactly(46L);
        assertThat(again.get(IdleStep.RELEASED)).containsExactly(61L);
        assertThat(node.scheduler.allocations()).isEmpty();
    }

    @Test
    void unmeasuredGpusAreNeverJudgedIdle() {
        open(policy(IdlePolicy.Action.RELEASE, List.of(), false, List.of()));
        node.allocate(GpuRequest.builder().requiredDevices(2).owner("erin").build()); // a MIG partition
        assertThat(run(60)).isEmpty();
        assertThat(node.scheduler.allocations()).hasSize(1);
    }

    @Test
    void aSignalWithNothingToSignalFailsAndIsAudited() {
        open(policy(IdlePolicy.Action.SIGNAL, List.of(), false, List.of()));
        node.allocate(GpuRequest.builder().requiredDevices(0).owner("frank").build());
        Map<IdleStep, List<Long>> at = run(40);
        assertThat(at.get(IdleStep.FAILED)).containsExactly(35L);
        assertThat(audited()).filteredOn(x -> x.action() == IdleStep.FAILED).singleElement()
                .satisfies(x -> assertThat(x.detail()).contains("no job cgroup and no holder"));
    }

    @Test
    void theHookRunsAsTheOwnerNeverAsRoot() throws IOException {
        assumeTrue(StateDirectory.isRoot(), "runs the hook through setpriv: needs root");
        Path out = Files.createDirectories(dir.resolve("out"));
        Files.setPosixFilePermissions(out, PosixFilePermissions.fromString("rwxrwxrwx"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path hook = dir.resolve("hook.sh");
        Files.writeString(hook, "#!/bin/sh\nid -u > \"$2/$1.uid\"\n");
        Files.setPosixFilePermissions(hook, PosixFilePermissions.fromString("rwxr-xr-x"));
        open(policy(IdlePolicy.Action.WARN, List.of(), false, List.of(hook.toString(), "{allocation}",
                out.toString())));
        Allocation mine = node.allocate(GpuRequest.builder().requiredDevices(0).build().withOwner("nobody", 65534));
        Allocation anon = node.allocate(GpuRequest.builder().requiredDevices(1).owner("ghost").build());
        run(25);
        assertThat(Files.readString(out.resolve(mine.id() + ".uid")).strip()).isEqualTo("65534");
        assertThat(out.resolve(anon.id() + ".uid")).doesNotExist();
        assertThat(audited()).filteredOn(x -> x.action() == IdleStep.WARNED && x.allocationId().equals(anon.id()))
                .singleElement().satisfies(x -> assertThat(x.detail()).contains("never runs as root"));
    }

    static Instant minute(long m) {
        return ScriptedNode.T0.plus(Duration.ofMinutes(m));
    }
}
