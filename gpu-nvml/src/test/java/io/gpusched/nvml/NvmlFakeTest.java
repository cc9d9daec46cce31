package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlLayout;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The binding and NvmlInventory against the fake libnvidia-ml.so.1 compiled from the real nvml.h. */
@Tag("native")
class NvmlFakeTest {
    @TempDir
    static Path dir;
    static Path lib;
    static Path sysfs;

    @BeforeAll
    static void build() throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        lib = FakeNvml.build(dir, false);
        FakeNvml.Control.bind(lib);
        sysfs = dir.resolve("sys");
        for (String bus : List.of("06", "07", "0a", "0b", "85", "86", "89", "8a")) {
            Path d = Files.createDirectories(sysfs.resolve("bus/pci/devices/0000:" + bus + ":00.0"));
            Files.writeString(d.resolve("numa_node"), bus.compareTo("80") < 0 ? "0\n" : "1\n");
        }
    }

    private final List<String> events = new CopyOnWriteArrayList<>();

    @BeforeEach
    void reset() {
        FakeNvml.Control.fake_nvml_reset();
    }

    @AfterEach
    void noSessionLeft() {
        assertThat(FakeNvml.Control.fake_nvml_initialized()).as("nvmlShutdown was called for every nvmlInit_v2")
                .isZero();
        assertThat(FakeNvml.Control.fake_nvml_violations()).as("no call after shutdown, no shutdown under a waiter")
                .isZero();
        assertThat(FakeNvml.Control.fake_nvml_event_set_allocated()).as("the event set was freed").isZero();
    }

    private NvmlOptions options(Duration recoverAfter) {
        return NvmlOptions.defaults().withLibrary(lib).withSysfsRoot(sysfs)
                .withHealthWatch(true, Duration.ofMillis(50), recoverAfter);
    }

    private NvmlInventory open(int scenario, Duration recoverAfter) {
        FakeNvml.Control.fake_nvml_set_scenario(scenario);
        NvmlInventory inv = NvmlInventory.open(options(recoverAfter));
        inv.addHealthListener((d, h) -> events.add(d.index() + ":" + h));
        return inv;
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        for (int i = 0; i < 1000 && !condition.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(condition.getAsBoolean()).as(what).isTrue();
    }

    @Test
    void structLayoutsMatchTheRealHeader() {
        long[][] expected = {
            {0, NvmlLayout.PCI_SIZE}, {1, NvmlLayout.PCI_DOMAIN}, {2, NvmlLayout.PCI_BUS}, {3, NvmlLayout.PCI_DEVICE},
            {4, NvmlLayout.PCI_DEVICE_ID}, {5, NvmlLayout.PCI_BUS_ID}, {6, NvmlLayout.MEMORY_SIZE},
            {7, NvmlLayout.MEMORY_TOTAL}, {8, NvmlLayout.MEMORY_USED}, {9, NvmlLayout.MEMORY_V2_SIZE},
            {10, NvmlLayout.MEMORY_V2_TOTAL}, {11, NvmlLayout.MEMORY_V2_USED}, {12, NvmlLayout.MEMORY_V2_VERSION},
            {13, NvmlLayout.UTILIZATION_SIZE}, {14, NvmlLayout.UTILIZATION_GPU}, {15, NvmlLayout.EVENT_SIZE},
            {16, NvmlLayout.EVENT_TYPE}, {17, NvmlLayout.EVENT_DATA}, {18, NvmlLayout.EVENT_GPU_INSTANCE},
            {19, NvmlLayout.EVENT_COMPUTE_INSTANCE}, {20, NvmlLayout.PROCESS_SIZE}, {21, NvmlLayout.PROCESS_PID},
            {22, NvmlLayout.PROCESS_USED_MEMORY}, {23, NvmlLayout.EVENT_TYPE_XID}, {24, NvmlLayout.NVLINK_MAX_LINKS},
            {25, NvmlLayout.NVLINK_DEVICE_TYPE_SWITCH}, {26, NvmlLayout.STRING_BUFFER},
            {27, NvmlLayout.PROCESS_UTIL_SIZE}, {28, NvmlLayout.PROCESS_UTIL_PID},
            {29, NvmlLayout.PROCESS_UTIL_TIMESTAMP}, {30, NvmlLayout.PROCESS_UTIL_SM},
            {31, NvmlLayout.PROCESS_GPU_INSTANCE}, {32, NvmlLayout.PROCESS_COMPUTE_INSTANCE},
            {33, NvmlLayout.VALUE_NOT_AVAILABLE}};
        for (long[] e : expected) {
            assertThat(e[1]).as("layout item %d", e[0]).isEqualTo(FakeNvml.Control.fake_nvml_layout((int) e[0]));
        }
    }

    @Test
    void discoversADgx1WithNvLinkTopologyAndMinorsThatDifferFromIndices() {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            List<GpuDevice> d = inv.devices();
            assertThat(d).hasSize(8);
            GpuDevice g0 = d.get(0);
            assertThat(g0.name()).isEqualTo("Tesla V100-SXM2-32GB");
            assertThat(g0.memory()).isEqualTo(MemorySize.ofGibibytes(32));
            assertThat(g0.computeCapability()).hasValueSatisfying(cc -> assertThat(cc.toString()).isEqualTo("7.0"));
            assertThat(g0.pciBusId()).isEqualTo("00000000:06:00.0");
            assertThat(g0.minor()).hasValue(1);
            assertThat(d.get(1).minor()).hasValue(0);
            assertThat(d.get(5).minor()).hasValue(5);
            assertThat(g0.numaNode()).hasValue(0);
            assertThat(d.get(4).numaNode()).hasValue(1);
            assertThat(g0.driverVersion()).contains("580.65.06");
            assertThat(g0.uuid()).startsWith("GPU-");
            assertThat(g0.properties()).containsEntry("serial", "1324000000000")
                    .containsEntry("persistence_mode", "Enabled").containsEntry("mig_mode", "Disabled")
                    .containsEntry("cuda_driver_version", "13.0");
            assertThat(inv.cudaDriverVersion()).hasValue(13000);
            GpuTopology t = inv.topology();
            for (int a = 0; a < 8; a++) {
                int sum = 0;
                for (int b = 0; b < 8; b++) {
                    sum += t.linkCount(a, b);
                }
                assertThat(sum).as("NVLinks of GPU %d", a).isEqualTo(6);
            }
            assertThat(t.linkCount(0, 3)).isEqualTo(2);
            assertThat(t.linkCount(0, 5)).isZero();
            assertThat(t.pcieLevel(0, 1)).isEqualTo(PcieLevel.SINGLE);
            assertThat(t.pcieLevel(0, 2)).isEqualTo(PcieLevel.HOSTBRIDGE);
            assertThat(t.pcieLevel(0, 5)).isEqualTo(PcieLevel.SYSTEM);
        }
    }

    @Test
    void nvSwitchMakesEveryPairAllToAll() {
        try (NvmlInventory inv = open(FakeNvml.HGX, Duration.ofHours(1))) {
            assertThat(inv.topology().links()).hasSize(28)
                    .allSatisfy(l -> assertThat(l.linkCount()).isEqualTo(18));
            assertThat(inv.devices().get(0).memory()).isEqualTo(MemorySize.ofGibibytes(80));
        }
    }

    @Test
    void migDevicesAreAllocatableChildrenAndTheirParentIsNot() {
        try (NvmlInventory inv = open(FakeNvml.MIG, Duration.ofHours(1))) {
            List<GpuDevice> d = inv.devices();
            assertThat(d).extracting(GpuDevice::index).containsExactly(2, 3, 1);
            GpuDevice mig = d.get(0);
            assertThat(mig.uuid()).startsWith("MIG-");
            assertThat(mig.parentUuid()).contains("GPU-fa4e0000-0000-4000-8000-000000000200");
            assertThat(mig.memory()).isEqualTo(MemorySize.ofGibibytes(40));
            assertThat(mig.minor()).hasValue(0);
            assertThat(mig.properties()).containsEntry("mig.gpu_instance_id", "1")
                    .containsEntry("mig.compute_instance_id", "0");
            assertThat(d).noneMatch(x -> x.uuid().equals("GPU-fa4e0000-0000-4000-8000-000000000200"));
            GpuTopology t = inv.topology();
            assertThat(t.pcieLevel(2, 3)).isEqualTo(PcieLevel.INTERNAL);
            assertThat(t.linkCount(2, 3)).isZero();
            assertThat(t.linkCount(2, 1)).isEqualTo(12);
            GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
            assertThat(s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--gpu-memory=40GB")).devices()).hasSize(2);
        }
    }

    @Test
    void sampleReadsEveryDevice() {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            GpuSample s = inv.sample();
            GpuMetrics m3 = s.forDevice(3).orElseThrow();
            assertThat(m3.utilizationPercent()).hasValue(30);
            assertThat(m3.memoryUsed()).contains(MemorySize.ofGibibytes(4));
            assertThat(m3.temperatureCelsius()).hasValue(33);
            assertThat(m3.powerWatts()).hasValue(103.5);
            GpuSample again = inv.sample();
            assertThat(again.metrics()).hasSize(8);
        }
    }

    @Test
    void migDevicesReportWhatTheyCanAndAbsentForTheRest() {
        try (NvmlInventory inv = open(FakeNvml.MIG, Duration.ofHours(1))) {
            GpuMetrics mig = inv.sample().forDevice(2).orElseThrow();
            assertThat(mig.utilizationPercent()).isEmpty();
            assertThat(mig.powerWatts()).isEmpty();
            assertThat(mig.memoryUsed()).contains(MemorySize.ofGibibytes(1));
        }
    }

    @Test
    void processListGrowsItsBufferOnInsufficientSize() {
        FakeNvml.Control.fake_nvml_set_processes(2, 40);
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            List<GpuProcess> p = inv.processes(inv.devices().get(2)).orElseThrow();
            assertThat(p).hasSize(40);
            assertThat(p.get(0).pid()).isEqualTo(4200);
            assertThat(p.get(1).usedMemory()).contains(MemorySize.ofGibibytes(2));
            assertThat(inv.processes(inv.devices().get(3)).orElseThrow()).isEmpty();
        }
    }

    @Test
    void xidMarksTheDeviceUnhealthyAndApplicationXidsAreIgnored() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            assertThat(FakeNvml.Control.fake_nvml_push_xid(4, 13, -1, -1)).isEqualTo(1);
            assertThat(FakeNvml.Control.fake_nvml_push_xid(5, 79, -1, -1)).isEqualTo(1);
            await(() -> events.contains("5:UNHEALTHY (XID 79)"), "XID 79 reaches the listener");
            assertThat(events).containsExactly("5:UNHEALTHY (XID 79)");
            assertThat(inv.health(inv.devices().get(4)).isHealthy()).isTrue();
            assertThat(inv.health(inv.devices().get(5))).isEqualTo(GpuHealth.unhealthy("XID 79"));
        }
    }

    @Test
    void aDeviceThatAnswersAgainAfterTheQuietPeriodReturns() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ZERO)) {
            FakeNvml.Control.fake_nvml_push_xid(1, 48, -1, -1);
            await(() -> events.contains("1:HEALTHY"), "device returns");
            assertThat(events).containsExactly("1:UNHEALTHY (XID 48)", "1:HEALTHY");
        }
    }

    @Test
    void migAttributedXidHitsOnlyThatMigDevice() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.MIG, Duration.ofHours(1))) {
            FakeNvml.Control.fake_nvml_push_xid(0, 94, 2, 0);
            await(() -> !events.isEmpty(), "XID 94 arrives");
            assertThat(events).containsExactly("3:UNHEALTHY (XID 94)");
        }
    }

    @Test
    void lostGpuIsMarkedLostAndHealthReachesTheScheduler() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            List<AllocationEvent> audit = new CopyOnWriteArrayList<>();
            GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).listener(audit::add).build();
            var a = s.allocate(GpuRequests.fromCliFlags("--devices=6"));
            FakeNvml.Control.fake_nvml_set_lost(6, 1);
            GpuSample sample = inv.sample();
            assertThat(sample.forDevice(6).orElseThrow().utilizationPercent()).isEmpty();
            await(() -> !s.devices().get(6).health().isHealthy(), "scheduler sees GPU 6 lost");
            assertThat(s.devices().get(6).health().state()).isEqualTo(GpuHealth.State.LOST);
            await(() -> audit.stream().anyMatch(e -> e.type() == AllocationEvent.Type.HEALTH_CHANGED),
                    "allocation holding GPU 6 is reported");
            assertThat(audit).filteredOn(e -> e.type() == AllocationEvent.Type.HEALTH_CHANGED)
                    .allSatisfy(e -> assertThat(e.allocationId()).contains(a.id()));
            s.release(a.id());
            assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--devices=6")))
                    .hasMessageContaining("LOST");
            s.close();
        }
    }

    @Test
    void lostGpuReturnsWhenItAnswersAgain() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ZERO)) {
            FakeNvml.Control.fake_nvml_set_lost(2, 1);
            inv.sample();
            await(() -> inv.health(inv.devices().get(2)).state() == GpuHealth.State.LOST, "GPU 2 lost");
            assertThat(events).containsExactly("2:LOST (nvmlDeviceGetUtilizationRates: NVML 15: The GPU has fallen off"
                    + " the bus or has otherwise become inaccessible)");
            FakeNvml.Control.fake_nvml_set_lost(2, 0);
            await(() -> events.contains("2:HEALTHY"), "GPU 2 back");
        }
    }

    @Test
    void initFailureIsAnUnavailabilityCause() {
        FakeNvml.Control.fake_nvml_set_init_result(9);
        NvmlInventoryProvider p = new NvmlInventoryProvider(options(Duration.ZERO));
        assertThat(p.isAvailable()).isFalse();
        assertThat(p.unavailabilityCause()).contains("driver not loaded (NVML 9: NVIDIA driver is not loaded)");
        assertThatThrownBy(() -> NvmlInventory.open(options(Duration.ZERO)))
                .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("driver not loaded");
        FakeNvml.Control.fake_nvml_set_init_result(4);
        assertThat(p.unavailabilityCause()).hasValueSatisfying(c -> assertThat(c).startsWith("no permission (NVML 4"));
        FakeNvml.Control.fake_nvml_set_init_result(0);
        assertThat(p.unavailabilityCause()).isEmpty();
    }

    @Test
    void closedInventoryRefusesToSample() {
        NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1));
        inv.close();
        inv.close();
        assertThatThrownBy(inv::sample).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void bindingReportsEveryGroupBound() {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1))) {
            assertThat(inv.libraryPath()).isEqualTo(lib.toAbsolutePath().toString());
        }
        NvmlBinding b = NvmlBinding.acquire(java.util.Optional.of(lib));
        try {
            assertThat(b.missing()).isEmpty();
        } finally {
            NvmlBinding.release();
        }
    }

    @Test
    void schedulerOverNvmlServesRequests() {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1));
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            var a = s.allocate(GpuRequest.builder().count(2).build());
            assertThat(inv.topology().linkCount(a.deviceIndices().get(0), a.deviceIndices().get(1))).isEqualTo(2);
            s.updateMetrics(inv.sample());
            assertThat(s.status().devices().get(7).utilizationPercent()).isEqualTo(70.0);
            assertThat(s.allocations()).extracting(x -> x.id()).containsExactly(a.id());
            assertThat(s.allocations().get(0).deviceIndices()).containsExactlyElementsOf(a.deviceIndices());
        }
    }

    // ---- issue 13: faults at open, processes of a lost GPU, recovery, close under a waiting watcher ----

    private static final String[] LIVE_CALLS = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage"};

    private static void injectLive(int gpu, int code) {
        for (String fn : LIVE_CALLS) {
            assertThat(FakeNvml.Control.fake_nvml_inject(fn, gpu, code)).isZero();
        }
    }

    @Test
    void aGpuLostBeforeOpenIsListedLostUnderAPlaceholderAndTheOthersAreServed() {
        FakeNvml.Control.fake_nvml_set_lost(2, 1);
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ZERO);
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            List<GpuDevice> d = inv.devices();
            assertThat(d).hasSize(8);
            GpuDevice lost = d.get(2);
            assertThat(lost.uuid()).isEqualTo("unidentified-nvml-2");
            assertThat(lost.memoryKnown()).isFalse();
            assertThat(lost.memory()).isEqualTo(MemorySize.ZERO);
            assertThat(lost.properties()).containsEntry("nvml.index", "2")
                    .hasEntrySatisfying("nvml.identity", v -> assertThat(v).contains("nvmlDeviceGetUUID: NVML 15"));
            assertThat(inv.health(lost).state()).isEqualTo(GpuHealth.State.LOST);
            assertThat(inv.health(lost).reason()).hasValueSatisfying(r -> assertThat(r)
                    .contains("nvmlDeviceGetUUID: NVML 15").contains("identity unreadable"));
            for (int i = 0; i < 8; i++) {
                if (i != 2) {
                    assertThat(d.get(i).uuid()).isEqualTo(String.format("GPU-fa4e0000-0000-4000-8000-%012d", i));
                    assertThat(d.get(i).memory()).isEqualTo(MemorySize.ofGibibytes(32));
                    assertThat(inv.health(d.get(i))).isEqualTo(GpuHealth.HEALTHY);
                }
            }
            assertThat(inv.topology().linkCount(0, 3)).isEqualTo(2);
            assertThat(inv.processes(lost)).isEmpty();
            assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--devices=2"))).hasMessageContaining("LOST");
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(8).build()))
                    .isInstanceOf(io.gpusched.core.GpuAllocationException.class);
            assertThat(s.allocate(GpuRequest.builder().count(7).build()).deviceIndices()).hasSize(7)
                    .doesNotContain(2);
            FakeNvml.Control.fake_nvml_set_lost(2, 0);
            inv.sample();
            assertThat(inv.health(lost).state()).as("a GPU without identity never returns in this session")
                    .isEqualTo(GpuHealth.State.LOST);
        }
        try (NvmlInventory again = open(FakeNvml.DGX1, Duration.ZERO)) {
            assertThat(again.devices().get(2).uuid()).as("reopened once it answers: its real identity")
                    .isEqualTo("GPU-fa4e0000-0000-4000-8000-000000000002");
        }
    }

    @Test
    void aGpuWhoseMemoryIsLostAtOpenIsLostWithUnknownMemoryNotHealthyWithZero() {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.DGX1);
        FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetMemoryInfo_v2", 5, 15);
        FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetMemoryInfo", 5, 15);
        try (NvmlInventory inv = NvmlInventory.open(options(Duration.ofHours(1)));
             GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            GpuDevice g5 = inv.devices().get(5);
            assertThat(g5.uuid()).isEqualTo("GPU-fa4e0000-0000-4000-8000-000000000005");
            assertThat(g5.memoryKnown()).isFalse();
            assertThat(inv.health(g5)).isEqualTo(GpuHealth.lost(
                    "nvmlDeviceGetMemoryInfo_v2: NVML 15: The GPU has fallen off the bus or has otherwise become"
                            + " inaccessible"));
            assertThat(s.devices().get(5).health().state()).as("the scheduler has it from discovery, before any"
                    + " sample").isEqualTo(GpuHealth.State.LOST);
            assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--devices=5"))).hasMessageContaining("LOST");
        }
    }

    @Test
    void processesOfALostGpuIsEmptyAndRecordedAsItsHealthNotAnException() {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.DGX1);
        try (NvmlInventory inv = NvmlInventory.open(options(Duration.ofHours(1)).withHealthWatch(false,
                Duration.ofMillis(50), Duration.ofHours(1)))) {
            FakeNvml.Control.fake_nvml_set_processes(0, 3);
            assertThat(inv.processes(inv.devices().get(0)).orElseThrow()).hasSize(3);
            FakeNvml.Control.fake_nvml_set_lost(0, 1);
            assertThat(inv.processes(inv.devices().get(0))).isEmpty();
            assertThat(inv.health(inv.devices().get(0)).state()).isEqualTo(GpuHealth.State.LOST);
            assertThat(inv.health(inv.devices().get(0)).reason())
                    .hasValueSatisfying(
                            r -> assertThat(r).startsWith("nvmlDeviceGetComputeRunningProcesses_v3: NVML 15"));
            assertThat(inv.processes(inv.devices().get(1))).hasValue(List.of());
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
                assertThat(s.allocate(GpuRequest.builder().count(1).build()).deviceIndices()).doesNotContain(0);
            }
            assertThatThrownBy(() -> inv.processes(GpuDevice.builder().index(9).uuid("GPU-other")
                    .vendor(io.gpusched.core.GpuVendor.NVIDIA).name("x").memory(MemorySize.ZERO).pciBusId("x").build()))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("GPU-other");
        }
    }

    @Test
    void aLostGpuWhoseStaticAttributesStillAnswerStaysLostWhileItsLiveCallsFail() throws Exception {
        try (NvmlInventory inv = open(FakeNvml.DGX1, Duration.ZERO)) {
            injectLive(2, 15);
            inv.sample();
            assertThat(inv.health(inv.devices().get(2)).state()).isEqualTo(GpuHealth.State.LOST);
            long probes = FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetUtilizationRates", 2);
            await(() -> FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetUtilizationRates", 2) >= probes + 5,
                    "the watcher keeps probing GPU 2");
            assertThat(inv.health(inv.devices().get(2)).state()).as("the minor number still answers; the metrics"
                    + " do not").isEqualTo(GpuHealth.State.LOST);
            assertThat(FakeNvml.Control.fake_nvml_hits("nvmlDeviceGetMinorNumber")).isZero();
            assertThat(events).noneMatch(e -> e.equals("2:HEALTHY"));
            FakeNvml.Control.fake_nvml_clear_injections();
            await(() -> events.contains("2:HEALTHY"), "GPU 2 back once its live calls answer");
            assertThat(events).hasSize(2);
        }
    }

    @Test
    void withTheWatcherOffSampleBringsALostGpuBackOnlyAfterAWholeRecoveryPeriodOfLiveAnswers() {
        ManualClock clock = new ManualClock();
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.DGX1);
        NvmlOptions o = options(Duration.ofSeconds(60)).withHealthWatch(false, Duration.ofMillis(50),
                Duration.ofSeconds(60)).withClock(clock);
        try (NvmlInventory inv = NvmlInventory.open(o)) {
            inv.addHealthListener((d, h) -> events.add(d.index() + ":" + h.state()));
            GpuDevice g4 = inv.devices().get(4);
            injectLive(4, 15);
            inv.sample();
            assertThat(inv.health(g4).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_clear_injections();
            inv.sample(); // answers at t0: the period starts
            clock.advance(Duration.ofSeconds(30));
            inv.sample();
            assertThat(inv.health(g4).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetTemperature", 4, 10);
            inv.sample(); // a failing live call at t0+30: the period starts over, and LOST is not softened
            assertThat(inv.health(g4).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_clear_injections();
            clock.advance(Duration.ofSeconds(1));
            inv.sample(); // answers again at t0+31
            clock.advance(Duration.ofSeconds(59));
            inv.sample(); // t0+90: 59 s of answers
            assertThat(inv.health(g4).state()).isEqualTo(GpuHealth.State.LOST);
            clock.advance(Duration.ofSeconds(1));
            inv.sample(); // 60 s of answers
            assertThat(inv.health(g4)).isEqualTo(GpuHealth.HEALTHY);
            assertThat(events).containsExactly("4:LOST", "4:HEALTHY");
        }
    }

    @Test
    void closeLeavesNvmlUpWhileTheWatcherIsInsideEventSetWaitAndTheWatcherShutsItDownAfterFreeingItsSet()
            throws Exception {
        NvmlInventory inv = open(FakeNvml.DGX1, Duration.ofHours(1));
        await(() -> FakeNvml.Control.fake_nvml_in_wait() == 1, "the watcher waits for events");
        FakeNvml.Control.fake_nvml_block_wait(1);
        long waits = FakeNvml.Control.fake_nvml_calls_of("nvmlEventSetWait_v2", -1);
        await(() -> FakeNvml.Control.fake_nvml_calls_of("nvmlEventSetWait_v2", -1) > waits
                && FakeNvml.Control.fake_nvml_in_wait() == 1, "the watcher is blocked inside nvmlEventSetWait_v2");
        inv.close();
        assertThat(FakeNvml.Control.fake_nvml_in_wait()).isEqualTo(1);
        assertThat(FakeNvml.Control.fake_nvml_initialized()).as("no nvmlShutdown under the waiting thread")
                .isEqualTo(1);
        assertThat(FakeNvml.Control.fake_nvml_event_set_allocated()).isEqualTo(1);
        assertThatThrownBy(inv::sample).isInstanceOf(IllegalStateException.class);
        FakeNvml.Control.fake_nvml_block_wait(0);
        await(() -> FakeNvml.Control.fake_nvml_initialized() == 0, "the watcher shuts NVML down once it returns");
        assertThat(FakeNvml.Control.fake_nvml_event_set_allocated()).as("set freed (before shutdown: no violation)")
                .isZero();
        assertThat(FakeNvml.Control.fake_nvml_violations()).isZero();
    }
}
