package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.OptionalLong;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Per-process usage and the energy counter through the fake libnvidia-ml.so.1 compiled against the real nvml.h,
 * scripted over time: exact figures for a GPU two processes share (each process's own samples, never the device's
 * utilization), a MIG device (utilization not measured, memory per process), a GPU without the energy call (absent,
 * not 0), and each call's error paths (NOT_SUPPORTED, NO_PERMISSION, GPU_IS_LOST, INSUFFICIENT_SIZE, values the driver
 * does not report).
 */
@Tag("native")
class NvmlProcessUsageTest {
    @TempDir
    static Path dir;
    static Path lib;
    static final long GIB = 1L << 30;

    final ManualClock clock = new ManualClock(Instant.parse("2026-03-02T10:00:00Z"));

    @BeforeAll
    static void build() throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        lib = FakeNvml.build(dir, false);
        FakeNvml.Control.bind(lib);
        Files.createDirectories(dir.resolve("sys"));
    }

    @BeforeEach
    void reset() {
        FakeNvml.Control.fake_nvml_reset();
    }

    @AfterEach
    void noSessionLeft() {
        assertThat(FakeNvml.Control.fake_nvml_initialized()).isZero();
        assertThat(FakeNvml.Control.fake_nvml_violations()).isZero();
    }

    private NvmlInventory open(int scenario) {
        FakeNvml.Control.fake_nvml_set_scenario(scenario);
        return NvmlInventory.open(NvmlOptions.defaults().withLibrary(lib).withSysfsRoot(dir.resolve("sys"))
                .withHealthWatch(false, Duration.ofMillis(50), Duration.ofHours(1)).withClock(clock));
    }

    private static Map<Integer, GpuProcessUsage> byPid(ProcessUsageSample s) {
        return s.processes().stream().collect(Collectors.toMap(GpuProcessUsage::pid, p -> p));
    }

    /** µs on the fake driver's CPU clock: {@code seconds} after 10:00:00. */
    private static long us(double seconds) {
        return Instant.parse("2026-03-02T10:00:00Z").toEpochMilli() * 1000 + (long) (seconds * 1e6);
    }

    @Test
    void sharedGpuGivesEachProcessTheMeanOfItsOwnSamplesSinceThePreviousCall() {
        FakeNvml.Control.fake_nvml_set_device(1, 80, 10 * GIB, 249_000);
        FakeNvml.Control.fake_nvml_add_proc(1, -1, 4242, 6 * GIB);
        FakeNvml.Control.fake_nvml_add_proc(1, -1, 4343, 3 * GIB);
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            GpuDevice gpu = inv.devices().get(1);
            // the driver's samples before the first read: it reads the whole buffer
            FakeNvml.Control.fake_nvml_add_util_sample(1, 4242, us(0.5), 20);
            ProcessUsageSample first = inv.processUsage(gpu).orElseThrow();
            assertThat(FakeNvml.Control.fake_nvml_last_seen(1)).as("the first call reads the whole buffer").isZero();
            assertThat(byPid(first).get(4242).smUtilizationPercent()).hasValue(20.0);
            assertThat(byPid(first).get(4343).smUtilizationPercent()).as("listed, no sample: idle").hasValue(0.0);

            // ten seconds: 4242 sampled at 40 and 60 %, 4343 at 10 %, and a process only the samples name
            for (int k = 1; k <= 5; k++) {
                FakeNvml.Control.fake_nvml_add_util_sample(1, 4242, us(2 * k), k % 2 == 0 ? 60 : 40);
                FakeNvml.Control.fake_nvml_add_util_sample(1, 4343, us(2 * k), 10);
            }
            FakeNvml.Control.fake_nvml_add_util_sample(1, 5555, us(9), 30);
            clock.advance(Duration.ofSeconds(10));
            ProcessUsageSample s = inv.processUsage(gpu).orElseThrow();
            assertThat(FakeNvml.Control.fake_nvml_last_seen(1)).as("since the newest sample the first call read")
                    .isEqualTo(us(0.5));
            assertThat(s.takenAt()).isEqualTo(clock.instant());
            assertThat(s.utilizationUnmeasured()).isEmpty();
            assertThat(s.memoryUnmeasured()).isEmpty();
            Map<Integer, GpuProcessUsage> p = byPid(s);
            assertThat(p).containsOnlyKeys(4242, 4343, 5555);
            assertThat(p.get(4242).smUtilizationPercent()).as("(40+60+40+60+40)/5, not the device's 80 %")
                    .hasValue(48.0);
            assertThat(p.get(4343).smUtilizationPercent()).hasValue(10.0);
            assertThat(p.get(5555).smUtilizationPercent()).hasValue(30.0);
            assertThat(p.get(4242).memoryUsed()).hasValue(MemorySize.ofBytes(6 * GIB));
            assertThat(p.get(4343).memoryUsed()).hasValue(MemorySize.ofBytes(3 * GIB));
            assertThat(p.get(5555).memoryUsed()).as("not in the compute list: memory unknown").isEmpty();
            GpuMetrics m = inv.sample().forDevice(1).orElseThrow();
            assertThat(m.utilizationPercent()).as("the device's own figure differs").hasValue(80.0);

            // no sample since: NOT_FOUND, every listed process read 0 % over the period
            ProcessUsageSample quiet = inv.processUsage(gpu).orElseThrow();
            assertThat(FakeNvml.Control.fake_nvml_last_seen(1)).isEqualTo(us(10));
            assertThat(quiet.utilizationUnmeasured()).isEmpty();
            assertThat(byPid(quiet)).containsOnlyKeys(4242, 4343);
            assertThat(byPid(quiet).values()).allSatisfy(x -> assertThat(x.smUtilizationPercent()).hasValue(0.0));

            // a process leaves; the other keeps going
            FakeNvml.Control.fake_nvml_remove_proc(1, -1, 4343);
            FakeNvml.Control.fake_nvml_add_util_sample(1, 4242, us(12), 100);
            ProcessUsageSample later = inv.processUsage(gpu).orElseThrow();
            assertThat(byPid(later)).containsOnlyKeys(4242);
            assertThat(byPid(later).get(4242).smUtilizationPercent()).hasValue(100.0);
            assertThat(inv.health(gpu)).isEqualTo(GpuHealth.HEALTHY);
        }
    }

    @Test
    void moreSamplesThanTheFirstBufferHoldsAreAllRead() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_add_proc(2, -1, 1000, GIB);
            for (int k = 0; k < 200; k++) { // the driver answers INSUFFICIENT_SIZE with the count: grown, read again
                assertThat(FakeNvml.Control.fake_nvml_add_util_sample(2, 1000 + k % 50, us(1 + k), k % 2 == 0 ? 1
                        : 3)).isZero();
            }
            for (int pid = 1001; pid < 1020; pid++) {
                FakeNvml.Control.fake_nvml_add_proc(2, -1, pid, pid);
            }
            ProcessUsageSample s = inv.processUsage(inv.devices().get(2)).orElseThrow();
            assertThat(s.processes()).hasSize(50);
            assertThat(byPid(s).get(1000).smUtilizationPercent()).as("samples 0, 50, 100, 150: all even, 1 %")
                    .hasValue(1.0);
            assertThat(byPid(s).get(1001).smUtilizationPercent()).hasValue(3.0);
            assertThat(byPid(s).get(1001).memoryUsed()).hasValue(MemorySize.ofBytes(1001));
            assertThat(FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetProcessUtilization", 2)).isEqualTo(2);
        }
    }

    @Test
    void migDeviceSaysUtilizationIsNotMeasuredAndGivesMemoryPerProcess() {
        try (NvmlInventory inv = open(FakeNvml.MIG)) {
            List<GpuDevice> migs = inv.devices().stream().filter(GpuDevice::isPartition).toList();
            assertThat(migs).hasSize(2);
            GpuDevice mig0 = migs.stream().filter(d -> d.properties().get("mig.gpu_instance_id").equals("1"))
                    .findFirst().orElseThrow();
            FakeNvml.Control.fake_nvml_add_proc(0, 0, 7777, 5 * GIB);
            FakeNvml.Control.fake_nvml_add_proc(0, 1, 8888, 2 * GIB);
            FakeNvml.Control.fake_nvml_add_util_sample(0, 7777, us(1), 50);
            ProcessUsageSample s = inv.processUsage(mig0).orElseThrow();
            assertThat(s.utilizationUnmeasured()).hasValue(NvmlInventory.MIG_UTILIZATION);
            assertThat(s.memoryUnmeasured()).isEmpty();
            assertThat(s.processes()).containsExactly(new GpuProcessUsage(7777, OptionalDouble.empty(),
                    Optional.of(MemorySize.ofBytes(5 * GIB))));
            assertThat(FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetProcessUtilization", 0))
                    .as("not asked on MIG, where NVML does not support it").isZero();
            GpuMetrics m = inv.sample().forDevice(mig0.index()).orElseThrow();
            assertThat(m.energyMillijoules()).as("a MIG device has no energy counter of its own").isEmpty();
            assertThat(m.utilizationPercent()).isEmpty();
            GpuDevice whole = inv.devices().stream().filter(d -> !d.isPartition()).findFirst().orElseThrow();
            assertThat(inv.sample().forDevice(whole.index()).orElseThrow().energyMillijoules()).isPresent();
        }
    }

    @Test
    void energyCounterIsReadEachSweepAndAbsentWhereTheGpuHasNone() {
        FakeNvml.Control.fake_nvml_set_energy(0, 123_456_789L);
        FakeNvml.Control.fake_nvml_set_energy(3, -1); // before Volta: NOT_SUPPORTED
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            assertThat(inv.sample().forDevice(0).orElseThrow().energyMillijoules()).hasValue(123_456_789L);
            FakeNvml.Control.fake_nvml_set_energy(0, 126_000_000L);
            GpuMetrics m0 = inv.sample().forDevice(0).orElseThrow();
            assertThat(m0.energyMillijoules()).hasValue(126_000_000L);
            GpuMetrics m3 = inv.sample().forDevice(3).orElseThrow();
            assertThat(m3.energyMillijoules()).as("absent, not 0").isEqualTo(OptionalLong.empty());
            assertThat(m3.powerWatts()).isPresent();
            assertThat(inv.health(inv.devices().get(3))).as("NOT_SUPPORTED is no fault").isEqualTo(GpuHealth.HEALTHY);
            long asked = FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetTotalEnergyConsumption", 3);
            inv.sample();
            inv.sample();
            assertThat(FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetTotalEnergyConsumption", 3))
                    .as("a GPU without the counter is not asked again").isEqualTo(asked);
        }
    }

    @Test
    void energyCounterFailureIsAFaultOfThatGpuOnly() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetTotalEnergyConsumption", 5, 999);
            GpuMetrics m = inv.sample().forDevice(5).orElseThrow();
            assertThat(m.energyMillijoules()).isEmpty();
            assertThat(m.utilizationPercent()).isPresent();
            GpuHealth h = inv.health(inv.devices().get(5));
            assertThat(h.state()).isEqualTo(GpuHealth.State.UNHEALTHY);
            assertThat(h.reason()).hasValueSatisfying(r -> assertThat(r)
                    .contains("nvmlDeviceGetTotalEnergyConsumption").contains("NVML 999"));
            assertThat(inv.sample().forDevice(4).orElseThrow().energyMillijoules()).hasValue(5_000_000L);
        }
    }

    @Test
    void noPermissionForTheProcessListLeavesMemoryUnmeasuredAndSaysWhy() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_add_proc(1, -1, 4242, 6 * GIB);
            FakeNvml.Control.fake_nvml_add_util_sample(1, 4242, us(1), 70);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetComputeRunningProcesses_v3", 1, 4);
            ProcessUsageSample s = inv.processUsage(inv.devices().get(1)).orElseThrow();
            assertThat(s.memoryUnmeasured()).hasValueSatisfying(r -> assertThat(r)
                    .contains("nvmlDeviceGetComputeRunningProcesses_v3").contains("NVML 4").contains("permission"));
            assertThat(s.utilizationUnmeasured()).isEmpty();
            assertThat(s.processes()).as("the samples still name the process").containsExactly(
                    new GpuProcessUsage(4242, OptionalDouble.of(70), Optional.empty()));
            assertThat(inv.health(inv.devices().get(1))).isEqualTo(GpuHealth.HEALTHY);
        }
    }

    @Test
    void unsupportedOrForbiddenProcessUtilizationIsNotMeasuredAndNoFault() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_add_proc(1, -1, 4242, 6 * GIB);
            FakeNvml.Control.fake_nvml_add_proc(2, -1, 4343, 2 * GIB);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetProcessUtilization", 1, 3);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetProcessUtilization", 2, 4);
            ProcessUsageSample s1 = inv.processUsage(inv.devices().get(1)).orElseThrow();
            assertThat(s1.utilizationUnmeasured()).hasValue("nvmlDeviceGetProcessUtilization: NVML 3: The"
                    + " requested operation is not available on target device");
            assertThat(s1.processes()).containsExactly(new GpuProcessUsage(4242, OptionalDouble.empty(),
                    Optional.of(MemorySize.ofBytes(6 * GIB))));
            ProcessUsageSample s2 = inv.processUsage(inv.devices().get(2)).orElseThrow();
            assertThat(s2.utilizationUnmeasured()).hasValueSatisfying(r -> assertThat(r).contains("NVML 4"));
            assertThat(inv.health(inv.devices().get(1))).isEqualTo(GpuHealth.HEALTHY);
            assertThat(inv.health(inv.devices().get(2))).isEqualTo(GpuHealth.HEALTHY);
        }
    }

    @Test
    void lostGpuIsRecordedAndItsSampleSaysSo() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetProcessUtilization", 6, 15);
            ProcessUsageSample s = inv.processUsage(inv.devices().get(6)).orElseThrow();
            String why = "nvmlDeviceGetProcessUtilization: NVML 15: The GPU has fallen off the bus or has otherwise"
                    + " become inaccessible";
            assertThat(s.utilizationUnmeasured()).hasValue(why);
            assertThat(s.memoryUnmeasured()).hasValue(why);
            assertThat(s.processes()).isEmpty();
            assertThat(inv.health(inv.devices().get(6)).state()).isEqualTo(GpuHealth.State.LOST);
            assertThat(inv.health(inv.devices().get(7))).isEqualTo(GpuHealth.HEALTHY);
        }
    }

    @Test
    void memoryTheDriverDoesNotReportIsNotMeasuredNotZero() {
        try (NvmlInventory inv = open(FakeNvml.DGX1)) {
            FakeNvml.Control.fake_nvml_add_proc(3, -1, 10, -1);
            FakeNvml.Control.fake_nvml_add_proc(3, -1, 11, -1);
            ProcessUsageSample s = inv.processUsage(inv.devices().get(3)).orElseThrow();
            assertThat(s.memoryUnmeasured()).hasValue(NvmlProcessUsage.MEMORY_NOT_AVAILABLE);
            assertThat(s.processes()).extracting(GpuProcessUsage::memoryUsed).containsOnly(Optional.empty());
            FakeNvml.Control.fake_nvml_add_proc(3, -1, 11, 4096);
            ProcessUsageSample mixed = inv.processUsage(inv.devices().get(3)).orElseThrow();
            assertThat(mixed.memoryUnmeasured()).isEmpty();
            assertThat(byPid(mixed).get(10).memoryUsed()).isEmpty();
            assertThat(byPid(mixed).get(11).memoryUsed()).hasValue(MemorySize.ofBytes(4096));
        }
    }
}
