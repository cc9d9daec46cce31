package io.gpusched.nvml.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.nvml.FakeNvml;
import io.gpusched.nvml.NvmlInventory;
import io.gpusched.nvml.NvmlOptions;
import io.gpusched.testing.ManualClock;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Adversarial checks of issue 13's NVML part, through the public API only, against the fake NVML compiled from the
 * real nvml.h. Faults come from the fake's controls; time from an injected clock; lifecycle misuse is judged by the
 * fake's own violation record, never by the inventory.
 */
@Tag("native")
@Tag("adversarial")
class NvmlHealthAttackTest {
    static Path lib;
    static Path sysfs;

    static synchronized void prepare() throws Exception {
        if (lib != null) {
            return;
        }
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        Path dir = Files.createTempDirectory("gpusched-nvml-attack");
        Path built = FakeNvml.build(dir, false);
        FakeNvml.Control.bind(built);
        sysfs = dir.resolve("sys");
        Files.createDirectories(sysfs);
        lib = built;
    }

    /** Whether this test's setup loaded the fake (its assumption skips the test where gcc or nvml.h is absent). */
    private boolean prepared;

    @BeforeEach
    void reset() throws Exception {
        prepared = false;
        prepare();
        FakeNvml.Control.fake_nvml_reset();
        prepared = true;
    }

    @AfterEach
    void cleanShutdown() {
        if (!prepared) {
            return; // skipped before the fake was loaded: nothing native to check
        }
        FakeNvml.Control.fake_nvml_block_wait(0);
        assertThat(FakeNvml.Control.fake_nvml_initialized()).as("nvmlShutdown for every nvmlInit_v2").isZero();
        assertThat(FakeNvml.Control.fake_nvml_violations()).as("lifecycle violations seen by the fake").isZero();
        FakeNvml.Control.fake_nvml_reset();
    }

    static NvmlOptions opts(boolean watch, Clock clock) {
        return NvmlOptions.defaults().withLibrary(lib).withSysfsRoot(sysfs)
                .withHealthWatch(watch, Duration.ofMillis(20), Duration.ofMinutes(5)).withClock(clock);
    }

    static void await(BooleanSupplier c, String what) throws InterruptedException {
        for (int i = 0; i < 2000 && !c.getAsBoolean(); i++) {
            Thread.sleep(10);
        }
        assertThat(c.getAsBoolean()).as(what).isTrue();
    }

    static GpuScheduler scheduler(NvmlInventory inv, List<AllocationEvent> events) {
        return GpuScheduler.builder().inventory(inv).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).listener(events::add).build();
    }

    static GpuAllocationException refusal(GpuScheduler s, GpuRequest r) {
        try {
            Allocation a = s.allocate(r);
            throw new AssertionError("handed out " + a + " for " + r);
        } catch (GpuAllocationException e) {
            return e;
        }
    }

    @Test
    void gpuLostAtOpenIsLostFromDiscoveryAndNeverHandedOut() {
        FakeNvml.Control.fake_nvml_set_lost(3, 1);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            assertThat(inv.devices()).hasSize(8);
            GpuDevice d3 = inv.devices().get(3);
            assertThat(inv.health(d3).state()).as("before any sample").isEqualTo(GpuHealth.State.LOST);
            for (int i = 0; i < 8; i++) {
                if (i != 3) {
                    assertThat(inv.health(inv.devices().get(i)).isHealthy()).as("gpu " + i).isTrue();
                }
            }
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                refusal(s, GpuRequest.builder().deviceIndices(3).build());
                refusal(s, GpuRequest.builder().count(8).build());
                Allocation seven = s.allocate(GpuRequest.builder().count(7).build());
                assertThat(seven.devices().stream().map(GpuDevice::index)).doesNotContain(3);
            }
        }
    }

    @Test
    void lostGpu0StillGivesASchedulerWithDrain() {
        FakeNvml.Control.fake_nvml_set_lost(0, 1);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            assertThat(inv.processes(inv.devices().get(0))).isEmpty();
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                assertThat(s.status().drainSupported()).as("drain is a node property; GPU 0 alone is lost").isTrue();
                assertThat(String.join("\n", s.status().notes()).toLowerCase()).doesNotContain("drain");
                Allocation a = s.allocate(GpuRequest.builder().count(1).build());
                assertThat(a.devices().get(0).index()).isNotEqualTo(0);
            }
        }
    }

    @ParameterizedTest
    @CsvSource({"nvmlDeviceGetHandleByIndex_v2,15", "nvmlDeviceGetHandleByIndex_v2,999",
        "nvmlDeviceGetUUID,15", "nvmlDeviceGetUUID,10", "nvmlDeviceGetName,15", "nvmlDeviceGetName,999",
        "nvmlDeviceGetSerial,10", "nvmlDeviceGetSerial,15", "nvmlDeviceGetMemoryInfo_v2,15",
        "nvmlDeviceGetMinorNumber,999", "nvmlDeviceGetPciInfo_v3,10"})
    void identityFaultOnGpu0LeavesANodeWithASchedulerAndGpu0OutOfService(String fn, int code) {
        assertThat(FakeNvml.Control.fake_nvml_inject(fn, 0, code)).isZero();
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            GpuDevice d0 = inv.devices().get(0);
            assertThat(inv.health(d0).isHealthy()).isFalse();
            inv.sample();
            inv.processes(d0); // answers (a list, or empty with the fault recorded); never throws
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                assertThat(s.status().drainSupported()).isTrue();
                refusal(s, GpuRequest.builder().deviceIndices(0).build());
                refusal(s, GpuRequest.builder().count(8).build());
                assertThat(s.allocate(GpuRequest.builder().count(7).build()).devices().stream()
                        .map(GpuDevice::index)).doesNotContain(0);
            }
        }
    }

    @Test
    void staticAttributesAnsweringDoNotBringALostGpuBack() {
        ManualClock clock = new ManualClock();
        try (NvmlInventory inv = NvmlInventory.open(opts(false, clock))) {
            GpuDevice d2 = inv.devices().get(2);
            FakeNvml.Control.fake_nvml_set_lost(2, 1);
            inv.sample();
            assertThat(inv.health(d2).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_set_lost(2, 0);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetUtilizationRates", 2, 15);
            for (int i = 0; i < 5; i++) {
                clock.advance(Duration.ofMinutes(10));
                inv.sample();
                inv.processes(d2);
                assertThat(inv.health(d2).state()).as("live metric still failing, round " + i)
                        .isEqualTo(GpuHealth.State.LOST);
            }
        }
    }

    @Test
    void oneCleanAnswerThenAFailureRestartsTheRecoveryPeriodWatcherOff() {
        ManualClock clock = new ManualClock();
        try (NvmlInventory inv = NvmlInventory.open(opts(false, clock))) {
            GpuDevice d5 = inv.devices().get(5);
            FakeNvml.Control.fake_nvml_set_lost(5, 1);
            inv.sample();
            assertThat(inv.health(d5).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_set_lost(5, 0);
            inv.sample(); // first clean answer at t0
            clock.advance(Duration.ofMinutes(3));
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetTemperature", 5, 10);
            inv.sample(); // failure at t0+3m: period starts over
            assertThat(inv.health(d5).isHealthy()).isFalse();
            FakeNvml.Control.fake_nvml_clear_injections();
            clock.advance(Duration.ofMinutes(3)); // t0+6m: > 5 m after t0, only 3 m after the failure
            inv.sample();
            assertThat(inv.health(d5).isHealthy()).as("3 m clean after a failure, period 5 m").isFalse();
            clock.advance(Duration.ofMinutes(3));
            inv.sample();
            assertThat(inv.health(d5).isHealthy()).as("clean only 3 m since the first clean answer after it")
                    .isFalse();
            clock.advance(Duration.ofMinutes(3));
            inv.sample();
            assertThat(inv.health(d5).isHealthy()).as("clean for 6 m since the first clean answer after it")
                    .isTrue();
        }
    }

    @Test
    void closeWhileTheWatcherIsStuckInsideWaitNeverShutsDownUnderIt() throws Exception {
        FakeNvml.Control.fake_nvml_block_wait(1);
        NvmlInventory inv = NvmlInventory.open(opts(true, new ManualClock()));
        await(() -> FakeNvml.Control.fake_nvml_in_wait() > 0, "watcher inside nvmlEventSetWait_v2");
        Thread closer = new Thread(inv::close);
        closer.start();
        closer.join(60_000);
        assertThat(closer.isAlive()).as("close returns (bounded)").isFalse();
        inv.close();
        assertThat(FakeNvml.Control.fake_nvml_violations()).as("no shutdown under the waiting thread").isZero();
        assertThatThrownBy(inv::sample).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> inv.processes(inv.devices().get(0))).isInstanceOf(IllegalStateException.class);
        FakeNvml.Control.fake_nvml_block_wait(0);
        await(() -> FakeNvml.Control.fake_nvml_initialized() == 0, "shutdown once the wait returned");
        await(() -> FakeNvml.Control.fake_nvml_in_wait() == 0, "watcher out");
        assertThat(FakeNvml.Control.fake_nvml_event_set_allocated()).isZero();
    }

    @Test
    void closeRacingSampleAndProcessesGivesOnlyResultsOrIllegalState() throws Exception {
        for (int round = 0; round < 30; round++) {
            FakeNvml.Control.fake_nvml_reset();
            NvmlInventory inv = NvmlInventory.open(opts(round % 2 == 0, new ManualClock()));
            CyclicBarrier go = new CyclicBarrier(4);
            AtomicReference<Throwable> bad = new AtomicReference<>();
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < 3; t++) {
                int k = t;
                ts.add(new Thread(() -> {
                    try {
                        go.await();
                        for (int i = 0; i < 200; i++) {
                            if (k == 0) {
                                inv.sample();
                            } else {
                                inv.processes(inv.devices().get(i % 8));
                                inv.health(inv.devices().get(i % 8));
                            }
                        }
                    } catch (IllegalStateException expected) {
                        // closed
                    } catch (Throwable e) {
                        bad.compareAndSet(null, e);
                    }
                }));
            }
            ts.forEach(Thread::start);
            go.await();
            inv.close();
            for (Thread t : ts) {
                t.join(60_000);
            }
            inv.close();
            assertThat(bad.get()).as("round " + round).isNull();
            await(() -> FakeNvml.Control.fake_nvml_initialized() == 0, "shut down");
            assertThat(FakeNvml.Control.fake_nvml_violations()).as("round " + round).isZero();
        }
    }

    @Test
    void migDevicesOfALostParentAreLostAtOpen() {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.MIG);
        FakeNvml.Control.fake_nvml_set_lost(0, 1);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            assertThat(inv.devices()).isNotEmpty();
            for (GpuDevice d : inv.devices()) {
                boolean ofGpu0 = d.index() == 0 || d.parentUuid().isPresent();
                if (ofGpu0) {
                    assertThat(inv.health(d).isHealthy()).as(d.toString()).isFalse();
                }
            }
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                for (GpuDevice d : inv.devices()) {
                    if (d.parentUuid().isPresent()) {
                        refusal(s, GpuRequest.builder().deviceIndices(d.index()).build());
                    }
                }
            }
        }
    }

    @Test
    void parentFaultAfterOpenReachesItsMigDevices() {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.MIG);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            List<GpuDevice> migs = inv.devices().stream().filter(d -> d.parentUuid().isPresent()).toList();
            assertThat(migs).hasSize(2);
            migs.forEach(d -> assertThat(inv.health(d).isHealthy()).isTrue());
            FakeNvml.Control.fake_nvml_set_lost(0, 1);
            inv.sample();
            migs.forEach(d -> assertThat(inv.health(d).state()).as(d.toString()).isEqualTo(GpuHealth.State.LOST));
        }
    }

    @Test
    void xidOnOneMigDeviceMarksThatMigDevice() throws Exception {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.MIG);
        try (NvmlInventory inv = NvmlInventory.open(opts(true, new ManualClock()))) {
            List<GpuDevice> migs = inv.devices().stream().filter(d -> d.parentUuid().isPresent()).toList();
            assertThat(migs).hasSize(2);
            CountDownLatch changed = new CountDownLatch(1);
            inv.addHealthListener((d, h) -> changed.countDown());
            await(() -> FakeNvml.Control.fake_nvml_push_xid(0, 48, 2, 0) == 1, "xid registered and queued");
            assertThat(changed.await(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            // gi 2 is the fake's second MIG device (gi = slot + 1)
            GpuDevice second = migs.get(1);
            await(() -> !inv.health(second).isHealthy(), "MIG device with gi 2 unhealthy");
            List<GpuDevice> whole = inv.devices().stream()
                    .filter(d -> d.parentUuid().isEmpty() && d.index() != 0).toList();
            whole.forEach(d -> assertThat(inv.health(d).isHealthy()).as(d.toString()).isTrue());
        }
    }

    @Test
    void heldGpuThatIsLostIsReportedAndNeverHandedOutAgain() {
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                Allocation a = s.allocate(GpuRequest.builder().deviceIndices(4).build());
                String uuid = inv.devices().get(4).uuid();
                FakeNvml.Control.fake_nvml_set_lost(4, 1);
                inv.sample();
                assertThat(ev).anySatisfy(e -> {
                    assertThat(e.type()).isEqualTo(AllocationEvent.Type.HEALTH_CHANGED);
                    assertThat(e.deviceUuids()).contains(uuid);
                    assertThat(e.allocationId()).contains(a.id());
                });
                s.release(a.id());
                s.maintain();
                refusal(s, GpuRequest.builder().deviceIndices(4).build());
                refusal(s, GpuRequest.builder().count(8).build());
            }
        }
    }

    @Test
    void lostBetweenOpenAndSchedulerIsSeenByTheScheduler() {
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            FakeNvml.Control.fake_nvml_set_lost(6, 1);
            inv.sample();
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                refusal(s, GpuRequest.builder().deviceIndices(6).build());
                assertThat(s.status().devices().get(6).health()).isEqualTo("LOST");
            }
        }
    }

    @Test
    void steadyStateSampleAllocatesOnlyItsRecords() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        assumeTrue(mx.isThreadAllocatedMemorySupported(), "thread allocation counter unsupported");
        mx.setThreadAllocatedMemoryEnabled(true);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            for (int i = 0; i < 5_000; i++) {
                inv.sample();
            }
            long tid = Thread.currentThread().getId();
            int n = 2_000;
            long before = mx.getThreadAllocatedBytes(tid);
            for (int i = 0; i < n; i++) {
                inv.sample();
            }
            long per = (mx.getThreadAllocatedBytes(tid) - before) / n;
            // 8 records with their Optionals, the list, the sample and three 8-slot arrays: well under 3 KiB
            assertThat(per).as("bytes allocated per sample of 8 GPUs").isLessThan(3_072);
        }
    }

    @Test
    void watcherAloneBringsALostGpuBackOnlyAfterTheWholePeriod() throws Exception {
        ManualClock clock = new ManualClock();
        try (NvmlInventory inv = NvmlInventory.open(opts(true, clock))) {
            GpuDevice d2 = inv.devices().get(2);
            FakeNvml.Control.fake_nvml_set_lost(2, 1);
            inv.sample();
            assertThat(inv.health(d2).state()).isEqualTo(GpuHealth.State.LOST);
            FakeNvml.Control.fake_nvml_set_lost(2, 0);
            long util = FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetUtilizationRates", 2);
            await(() -> FakeNvml.Control.fake_nvml_calls_of("nvmlDeviceGetUtilizationRates", 2) > util + 2,
                    "watcher probes the lost GPU");
            assertThat(inv.health(d2).isHealthy()).as("no time has passed").isFalse();
            clock.advance(Duration.ofMinutes(6));
            await(() -> inv.health(d2).isHealthy(), "healthy again without anyone sampling");
        }
    }

    @Test
    void xidDuringRecoveryRestartsThePeriod() throws Exception {
        ManualClock clock = new ManualClock();
        try (NvmlInventory inv = NvmlInventory.open(opts(true, clock))) {
            GpuDevice d1 = inv.devices().get(1);
            CountDownLatch first = new CountDownLatch(1);
            inv.addHealthListener((d, h) -> first.countDown());
            await(() -> FakeNvml.Control.fake_nvml_push_xid(1, 48, 0, 0) == 1, "xid queued");
            assertThat(first.await(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            assertThat(inv.health(d1).isHealthy()).isFalse();
            clock.advance(Duration.ofMinutes(4));
            inv.sample();
            long xids = FakeNvml.Control.fake_nvml_calls_of("nvmlEventSetWait_v2", -1);
            assertThat(FakeNvml.Control.fake_nvml_push_xid(1, 48, 0, 0)).isEqualTo(1);
            await(() -> FakeNvml.Control.fake_nvml_calls_of("nvmlEventSetWait_v2", -1) > xids + 2,
                    "watcher took the second XID");
            clock.advance(Duration.ofMinutes(2)); // 6 m after the first XID, 2 m after the second
            inv.sample();
            assertThat(inv.health(d1).isHealthy()).as("only 2 m since the last XID").isFalse();
            clock.advance(Duration.ofMinutes(6));
            inv.sample();
            await(() -> inv.health(d1).isHealthy(), "healthy after a quiet period");
        }
    }

    @Test
    void lostWholeGpuInMigScenarioLeavesTheMigDevicesOfTheOtherParentServed() {
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.MIG);
        FakeNvml.Control.fake_nvml_set_lost(1, 1);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            List<GpuDevice> migs = inv.devices().stream().filter(d -> d.parentUuid().isPresent()).toList();
            assertThat(migs).hasSize(2);
            inv.sample();
            migs.forEach(d -> assertThat(inv.health(d).isHealthy()).as(d.toString()).isTrue());
        }
    }

    static long bytesPerSample(NvmlInventory inv) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        for (int i = 0; i < 5_000; i++) {
            inv.sample();
        }
        long tid = Thread.currentThread().getId();
        int n = 2_000;
        long before = mx.getThreadAllocatedBytes(tid);
        for (int i = 0; i < n; i++) {
            inv.sample();
        }
        return (mx.getThreadAllocatedBytes(tid) - before) / n;
    }

    /**
     * A GPU that stays lost or keeps failing one call is steady state too: its samples may not build a new health
     * reason every time. Judged against the same inventory's healthy sweeps, measured in the same run.
     */
    @Test
    void steadyStateSampleWithALostGpuAllocatesOnlyItsRecords() {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        assumeTrue(mx.isThreadAllocatedMemorySupported(), "thread allocation counter unsupported");
        mx.setThreadAllocatedMemoryEnabled(true);
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            long healthy = bytesPerSample(inv);
            FakeNvml.Control.fake_nvml_inject("nvmlDeviceGetTemperature", 3, 999);
            FakeNvml.Control.fake_nvml_set_lost(5, 1);
            long faulty = bytesPerSample(inv);
            assertThat(inv.health(inv.devices().get(5)).state()).isEqualTo(GpuHealth.State.LOST);
            assertThat(inv.health(inv.devices().get(3)).isHealthy()).isFalse();
            // the failing devices' records hold fewer values than healthy ones: no more bytes than a healthy sweep
            assertThat(faulty).as("bytes per sample, one GPU lost and one failing, against %d healthy", healthy)
                    .isLessThanOrEqualTo(healthy + 64);
        }
    }

    @ParameterizedTest
    @CsvSource({"nvmlDeviceGetUUID,15", "nvmlDeviceGetUUID,999", "nvmlDeviceGetHandleByIndex_v2,10",
        "nvmlDeviceGetMemoryInfo_v2,15"})
    void everyGpuFailingIdentityOrMemoryStillOpensAndHandsNothingOut(String fn, int code) {
        assertThat(FakeNvml.Control.fake_nvml_inject(fn, -1, code)).isZero();
        try (NvmlInventory inv = NvmlInventory.open(opts(false, new ManualClock()))) {
            assertThat(inv.devices()).hasSize(8);
            assertThat(inv.devices().stream().map(GpuDevice::uuid).distinct()).hasSize(8);
            inv.devices().forEach(d -> assertThat(inv.health(d).isHealthy()).as(d.toString()).isFalse());
            inv.sample();
            List<AllocationEvent> ev = Collections.synchronizedList(new ArrayList<>());
            try (GpuScheduler s = scheduler(inv, ev)) {
                refusal(s, GpuRequest.builder().count(1).build());
            }
        }
    }
}
