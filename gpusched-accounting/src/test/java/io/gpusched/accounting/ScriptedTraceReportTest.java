package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Scripted traces through the simulated inventory, the sampler and the store: a report's figures equal what the
 * script implies, exactly (the sweeps fall on the traces' step boundaries, the bound docs/ACCOUNTING.md states is then
 * zero), for an exclusive GPU, a GPU two allocations share, a MIG partition and a GPU without an energy counter.
 */
class ScriptedTraceReportTest {
    @TempDir
    Path dir;
    ScriptedNode node;

    private static final Duration TEN = Duration.ofSeconds(10);
    private static final long GIB = 1L << 30;

    @BeforeEach
    void open() {
        node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)));
    }

    @AfterEach
    void close() {
        node.close();
    }

    private AllocationUsage usage(Allocation a) {
        return AllocationUsage.find(node.store, a.id()).orElseThrow();
    }

    @Test
    void exclusiveGpuGetsTheDevicesFiguresExactly() {
        node.trace(0, new UsageTrace(TEN, List.of(90.0, 0.0), List.of(MemorySize.ofGibibytes(20),
                MemorySize.ofGibibytes(2)), List.of(250.0, 60.0)));
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").jobId("train").build());
        node.run(TEN, 6); // three 20-s cycles of [90 % at 250 W, 0 % at 60 W]
        node.scheduler.release(a.id());
        AllocationUsage u = usage(a);
        UsageFigures f = u.total();
        assertThat(f.heldMillis()).isEqualTo(60_000);
        assertThat(f.measuredMillis()).isEqualTo(60_000);
        assertThat(f.meanUtilization().getAsDouble()).isEqualTo(45.0);
        assertThat(f.peakUtilization()).hasValue(90);
        assertThat(f.idleMillis()).isEqualTo(30_000);
        assertThat(f.memoryPeakBytes()).hasValue(20 * GIB);
        assertThat(f.energyMillijoules()).as("counter deltas: 3 x (10 s x 250 W + 10 s x 60 W)")
                .isEqualTo(3 * (2_500_000L + 600_000L));
        assertThat(f.energyEstimated()).isFalse();
        assertThat(u.end()).contains("RELEASED");
        assertThat(u.complete()).isTrue();
        assertThat(u.owner()).contains("alice");
        assertThat(u.verdict()).isEqualTo("1 GPU, 0.02 GPU-hours, 45 % mean utilization, idle 50 % of the time,"
                + " 0.003 kWh, peak memory 20.0 GiB");
        UsageReport r = UsageReport.of(node.store, ScriptedNode.T0, node.clock.instant(), UsageReport.GroupBy.OWNER);
        assertThat(r.rows()).singleElement().satisfies(row -> {
            assertThat(row.key()).isEqualTo("alice");
            assertThat(row.allocations()).isEqualTo(1);
            assertThat(row.figures()).isEqualTo(f);
        });
    }

    @Test
    void sharedGpuIsSplitPerProcessNeverCopied() {
        SimulatedGpuInventory inv = node.inventory;
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(1).shared(MemorySize.ofGibibytes(8))
                .owner("alice").build());
        Allocation b = node.allocate(GpuRequest.builder().requiredDevices(1).shared(MemorySize.ofGibibytes(8))
                .owner("bob").build());
        node.pids.put(4242, a.id());
        node.pids.put(4343, b.id());
        inv.setProcessTraces(1, Map.of(
                4242, new UsageTrace(TEN, List.of(40.0), List.of(MemorySize.ofGibibytes(6)), List.of()),
                4343, new UsageTrace(TEN, List.of(10.0), List.of(MemorySize.ofGibibytes(3)), List.of()),
                5555, new UsageTrace(TEN, List.of(30.0), List.of(MemorySize.ofGibibytes(1)), List.of())));
        node.sweep(); // the processes' "previous call" is now
        long e0 = inv.sample().forDevice(1).orElseThrow().energyMillijoules().getAsLong();
        node.run(TEN, 6);
        long deviceEnergy = inv.sample().forDevice(1).orElseThrow().energyMillijoules().getAsLong() - e0;
        node.scheduler.release(a.id());
        node.scheduler.release(b.id());
        UsageFigures fa = usage(a).total();
        UsageFigures fb = usage(b).total();
        assertThat(fa.meanUtilization().getAsDouble()).as("alice's process, not the device's 80 %").isEqualTo(40.0);
        assertThat(fb.meanUtilization().getAsDouble()).isEqualTo(10.0);
        assertThat(fa.memoryPeakBytes()).hasValue(6 * GIB);
        assertThat(fb.memoryPeakBytes()).hasValue(3 * GIB);
        // the device drew 45 + 255 x 80 % = 249 W for 60 s; split by SM share over all processes (40:10:30),
        // the unattributed process's share charged to no one
        assertThat(deviceEnergy).isEqualTo(249L * 60_000);
        assertThat(fa.energyMillijoules()).isCloseTo(deviceEnergy * 40 / 80, within(12L));
        assertThat(fb.energyMillijoules()).isCloseTo(deviceEnergy * 10 / 80, within(12L));
        assertThat(fa.energyEstimated()).isTrue();
        assertThat(usage(a).devices().get(0).notes()).contains(UsageMeter.SPLIT_BY_UTIL);
        assertThat(fa.heldMillis()).isEqualTo(60_000);
        assertThat(fa.utilizationMillis()).isEqualTo(60_000);
        assertThat(fa.idleMillis()).isZero();
    }

    @Test
    void migPartitionSaysUtilizationIsNotMeasured() {
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(2).owner("carol").build());
        node.inventory.setProcessTraces(2, Map.of(77, new UsageTrace(TEN, List.of(50.0),
                List.of(MemorySize.ofGibibytes(5)), List.of())));
        node.pids.put(77, a.id());
        node.run(TEN, 3);
        node.scheduler.release(a.id());
        AllocationUsage u = usage(a);
        UsageFigures f = u.total();
        assertThat(f.meanUtilization()).isEmpty();
        assertThat(f.utilizationMillis()).isZero();
        assertThat(f.idleMillis()).as("unmeasured is not idle").isZero();
        assertThat(f.memoryPeakBytes()).hasValue(5 * GIB);
        assertThat(f.energyMillis()).isZero();
        assertThat(u.devices().get(0).notes()).anySatisfy(n -> assertThat(n).startsWith("utilization not measured:"
                + " MIG")).contains(UsageMeter.MIG_ENERGY);
        assertThat(u.verdict()).contains("utilization not measured").contains("energy not measured");
    }

    @Test
    void gpuWithoutEnergyCounterGetsAnEstimateMarkedAsSuch() {
        node.trace(3, UsageTrace.of(TEN, 100));
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(3).owner("dave").build());
        node.run(TEN, 6);
        node.scheduler.release(a.id());
        UsageFigures f = usage(a).total();
        assertThat(f.energyMillijoules()).as("300 W x 60 s from power samples").isEqualTo(300L * 60_000);
        assertThat(f.estimatedMillijoules()).isEqualTo(f.energyMillijoules());
        assertThat(usage(a).devices().get(0).notes()).contains(UsageMeter.ESTIMATED_POWER);
        assertThat(usage(a).verdict()).contains("(estimated)");
    }

    @Test
    void aReleaseBetweenSweepsCountsHeldTimeButNotSampledTime() {
        node.trace(0, UsageTrace.of(TEN, 80));
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).build());
        node.run(TEN, 2);
        node.clock.advance(Duration.ofSeconds(4));
        node.scheduler.release(a.id());
        UsageFigures f = usage(a).total();
        assertThat(f.heldMillis()).isEqualTo(24_000);
        assertThat(f.measuredMillis()).isEqualTo(20_000);
        assertThat(f.meanUtilization().getAsDouble()).isEqualTo(80.0);
    }

    @Test
    void whileAnAllocationRunsTheStoreLagsAtMostOneCheckpoint() {
        node.trace(0, UsageTrace.of(TEN, 50));
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("gina").build());
        for (int i = 0; i < 60; i++) { // ten minutes of sweeps, checkpoint every 30 s
            node.clock.advance(TEN);
            node.sweep();
            Optional<AllocationUsage> u = AllocationUsage.find(node.store, a.id());
            Instant durable = u.map(AllocationUsage::to).orElse(a.createdAt());
            assertThat(Duration.between(durable, node.clock.instant())).as("what a crash now would lose")
                    .isLessThan(Duration.ofSeconds(30));
            u.ifPresent(x -> assertThat(x.total().heldMillis()).isEqualTo(Duration.between(a.createdAt(), x.to())
                    .toMillis()));
        }
    }

    @Test
    void timeNoSamplerSawIsAGapWhoseEnergyTheCounterBridges() {
        node.trace(0, new UsageTrace(TEN, List.of(50.0), List.of(), List.of(200.0)));
        node.sweep();
        Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("jo").build());
        node.run(TEN, 3);
        node.scheduler.removeListener(node.sampler);
        node.sampler.close(); // the sampler stops; a minute passes with none
        node.clock.advance(Duration.ofSeconds(60));
        try (AccountingSampler again = AccountingSampler.open(node.store, AccountingSettings.defaults(),
                node.inventory, ProcessAttribution.none(), new HostIdleEffects(node.scheduler), node.clock)
                .orElseThrow()) {
            node.scheduler.addListener(again);
            again.sweep(node.inventory.sample(), node.scheduler.allocations());
            node.clock.advance(TEN);
            again.sweep(node.inventory.sample(), node.scheduler.allocations());
            node.scheduler.release(a.id());
        }
        AllocationUsage u = usage(a);
        UsageFigures f = u.total();
        assertThat(f.heldMillis()).isEqualTo(100_000);
        assertThat(f.measuredMillis()).as("the minute without a sampler is not sampled").isEqualTo(40_000);
        assertThat(f.energyMillijoules()).as("200 W the whole 100 s: the counter bridges the gap")
                .isEqualTo(200L * 100_000);
        assertThat(f.estimatedMillijoules()).isZero();
        assertThat(u.gaps()).isEqualTo(60_000);
        assertThat(u.devices().get(0).notes()).contains(UsageMeter.NOT_SAMPLED);
    }
}
