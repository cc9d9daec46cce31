package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.nvml.FakeNvml;
import io.gpusched.nvml.NvmlInventory;
import io.gpusched.nvml.NvmlOptions;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Reports checked end to end through the NVML backend: the fake libnvidia-ml.so.1 (compiled against the real nvml.h)
 * is scripted, sweep by sweep, with device utilization, memory, power, the total-energy counter, compute processes
 * and the driver's per-process utilization samples; the node's sampler reads it through {@link NvmlInventory} and the
 * store's report equals what the script implies (exactly: sweeps fall on the script's step boundaries) for an
 * exclusive GPU, a GPU two allocations share (each charged its own processes' samples, never the device's 80 %), a
 * MIG device (utilization not measured) and a GPU without the energy call (an estimate, marked). The sampler also keeps
 * dcgm-exporter's job-mapping directory in step.
 */
@Tag("native")
class NvmlScriptedReportTest {
    static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");
    static final Duration TEN = Duration.ofSeconds(10);
    static final long GIB = 1L << 30;

    @TempDir
    static Path build;
    static Path lib;

    @TempDir
    Path state;
    final ManualClock clock = new ManualClock(T0);
    final Map<Integer, String> pids = new ConcurrentHashMap<>();
    NvmlInventory inventory;
    GpuScheduler scheduler;
    AccountingStore store;
    AccountingSampler sampler;
    final long[] energy = new long[8];
    long micros = T0.toEpochMilli() * 1000;

    @BeforeAll
    static void fake() throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        lib = FakeNvml.build(build, false);
        FakeNvml.Control.bind(lib);
    }

    @BeforeEach
    void reset() {
        FakeNvml.Control.fake_nvml_reset();
        for (int g = 0; g < 8; g++) {
            energy[g] = 1_000_000_000L * (g + 1);
            FakeNvml.Control.fake_nvml_set_energy(g, energy[g]);
        }
    }

    void open(int scenario) throws Exception {
        FakeNvml.Control.fake_nvml_set_scenario(scenario);
        Files.createDirectories(state.resolve("sys"));
        inventory = NvmlInventory.open(NvmlOptions.defaults().withLibrary(lib).withSysfsRoot(state.resolve("sys"))
                .withHealthWatch(false, Duration.ofMillis(50), Duration.ofHours(1)).withClock(clock));
        scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        store = AccountingStore.at(state);
        ProcessAttribution byPid = (device, pid, holders) -> Optional.ofNullable(pids.get(pid))
                .map(UsageOwner::allocation);
        sampler = AccountingSampler.open(store, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30))
                .withHpcJobMappingDir(state.resolve("hpc-jobs")), inventory, byPid,
                new HostIdleEffects(scheduler), clock).orElseThrow();
        scheduler.addListener(sampler);
    }

    @AfterEach
    void close() {
        if (sampler != null) {
            sampler.close();
            scheduler.close();
            inventory.close();
        }
        assertThat(FakeNvml.Control.fake_nvml_initialized()).isZero();
    }

    void sweep() {
        sampler.sweep(inventory.sample(), scheduler.allocations());
    }

    /** The next 10 s on GPU {@code g}: the device at {@code util} % and {@code watts}, its counter advanced. */
    void device(int g, int util, long usedBytes, long watts) {
        FakeNvml.Control.fake_nvml_set_device(g, util, usedBytes, watts * 1000);
        if (energy[g] >= 0) {
            energy[g] += watts * 10_000; // W x 10 s = mJ
            FakeNvml.Control.fake_nvml_set_energy(g, energy[g]);
        }
    }

    /** The driver records a sample of {@code pid} at {@code sm} % within the next 10 s. */
    void sample(int g, int pid, int sm) {
        micros += 1000;
        FakeNvml.Control.fake_nvml_add_util_sample(g, pid, micros, sm);
    }

    void tick() {
        clock.advance(TEN);
        micros = clock.instant().toEpochMilli() * 1000;
        sweep();
    }

    UsageFigures total(Allocation a) {
        return AllocationUsage.find(store, a.id()).orElseThrow().total();
    }

    @Test
    void exclusiveGpuGetsTheDevicesFiguresAndTheCountersDeltaExactly() throws Exception {
        open(FakeNvml.DGX1);
        sweep();
        Allocation a = scheduler.allocate(GpuRequest.builder().requiredDevices(2).owner("alice").jobId("train")
                .build());
        for (int i = 0; i < 6; i++) { // three 20-s cycles of [90 % at 250 W, 0 % at 60 W]
            device(2, i % 2 == 0 ? 90 : 0, (i % 2 == 0 ? 20 : 2) * GIB, i % 2 == 0 ? 250 : 60);
            tick();
        }
        assertThat(Files.readString(state.resolve("hpc-jobs/2"))).as("dcgm-exporter's mapping").isEqualTo("train\n");
        scheduler.release(a.id());
        sweep();
        assertThat(state.resolve("hpc-jobs/2")).as("removed once released").doesNotExist();
        UsageFigures f = total(a);
        assertThat(f.heldMillis()).isEqualTo(60_000);
        assertThat(f.measuredMillis()).isEqualTo(60_000);
        assertThat(f.meanUtilization()).hasValue(45.0);
        assertThat(f.peakUtilization()).hasValue(90);
        assertThat(f.idleMillis()).isEqualTo(30_000);
        assertThat(f.memoryPeakBytes()).hasValue(20 * GIB);
        assertThat(f.energyMillijoules()).as("the counter's deltas: 3 x (10 s x 250 W + 10 s x 60 W)")
                .isEqualTo(3 * (2_500_000L + 600_000L));
        assertThat(f.energyEstimated()).isFalse();
    }

    @Test
    void sharedGpuChargesEachAllocationItsOwnProcessesNeverTheDevicesFigure() throws Exception {
        open(FakeNvml.DGX1);
        sweep();
        Allocation a = scheduler.allocate(GpuRequest.builder().requiredDevices(1).shared(MemorySize.ofGibibytes(8))
                .owner("alice").build());
        Allocation b = scheduler.allocate(GpuRequest.builder().requiredDevices(1).shared(MemorySize.ofGibibytes(8))
                .owner("bob").build());
        pids.put(4242, a.id());
        pids.put(4343, b.id());
        FakeNvml.Control.fake_nvml_add_proc(1, -1, 4242, 6 * GIB);
        FakeNvml.Control.fake_nvml_add_proc(1, -1, 4343, 3 * GIB);
        FakeNvml.Control.fake_nvml_add_proc(1, -1, 5555, GIB);
        sweep(); // the processes' "previous call" is now
        long e0 = energy[1];
        for (int i = 0; i < 6; i++) {
            device(1, 80, 10 * GIB, 249);
            sample(1, 4242, 30); // alice's process: 30 and 50, a mean of 40
            sample(1, 4242, 50);
            sample(1, 4343, 10);
            sample(1, 5555, 30); // nobody's
            tick();
        }
        long deviceEnergy = energy[1] - e0;
        scheduler.release(a.id());
        scheduler.release(b.id());
        UsageFigures fa = total(a);
        UsageFigures fb = total(b);
        assertThat(fa.meanUtilization()).as("alice's process, not the device's 80 %").hasValue(40.0);
        assertThat(fb.meanUtilization()).hasValue(10.0);
        assertThat(fa.memoryPeakBytes()).hasValue(6 * GIB);
        assertThat(fb.memoryPeakBytes()).hasValue(3 * GIB);
        assertThat(deviceEnergy).isEqualTo(249L * 60_000);
        assertThat(fa.energyMillijoules()).as("split by SM share 40:10:30 of 80, the unattributed part to no one")
                .isCloseTo(deviceEnergy * 40 / 80, within(12L));
        assertThat(fb.energyMillijoules()).isCloseTo(deviceEnergy * 10 / 80, within(12L));
        assertThat(fa.energyEstimated()).isTrue();
        assertThat(fa.heldMillis()).isEqualTo(60_000);
        assertThat(fa.utilizationMillis()).isEqualTo(60_000);
        assertThat(fa.idleMillis()).isZero();
    }

    @Test
    void gpuWithoutTheEnergyCallGetsAnEstimateMarkedAsSuch() throws Exception {
        energy[3] = -1;
        FakeNvml.Control.fake_nvml_set_energy(3, -1);
        open(FakeNvml.DGX1);
        sweep();
        Allocation a = scheduler.allocate(GpuRequest.builder().requiredDevices(3).owner("dave").build());
        for (int i = 0; i < 6; i++) {
            device(3, 100, 4 * GIB, 300);
            tick();
        }
        scheduler.release(a.id());
        UsageFigures f = total(a);
        assertThat(f.energyMillijoules()).as("300 W x 60 s from power samples").isEqualTo(300L * 60_000);
        assertThat(f.estimatedMillijoules()).isEqualTo(f.energyMillijoules());
        assertThat(AllocationUsage.find(store, a.id()).orElseThrow().devices().get(0).notes())
                .contains(UsageMeter.ESTIMATED_POWER);
    }

    @Test
    void migDeviceSaysUtilizationIsNotMeasuredAndMeasuresMemory() throws Exception {
        open(FakeNvml.MIG);
        GpuDevice mig = inventory.devices().stream().filter(GpuDevice::isPartition)
                .filter(d -> d.properties().get("mig.gpu_instance_id").equals("1")).findFirst().orElseThrow();
        sweep();
        Allocation a = scheduler.allocate(GpuRequest.builder().requiredDevices(mig.index()).owner("carol")
                .jobId("mig-job").build());
        pids.put(77, a.id());
        FakeNvml.Control.fake_nvml_add_proc(0, 0, 77, 5 * GIB);
        for (int i = 0; i < 3; i++) {
            sample(0, 77, 50); // the parent's samples: NVML gives none per MIG device, and none is read
            tick();
        }
        assertThat(Files.readString(state.resolve("hpc-jobs/0.1"))).isEqualTo("mig-job\n");
        scheduler.release(a.id());
        AllocationUsage u = AllocationUsage.find(store, a.id()).orElseThrow();
        UsageFigures f = u.total();
        assertThat(f.meanUtilization()).isEmpty();
        assertThat(f.idleMillis()).as("unmeasured is not idle").isZero();
        assertThat(f.memoryPeakBytes()).hasValue(5 * GIB);
        assertThat(f.energyMillis()).isZero();
        assertThat(u.devices().get(0).notes()).anySatisfy(n -> assertThat(n).startsWith("utilization not measured:"
                + " MIG")).contains(UsageMeter.MIG_ENERGY);
    }
}
