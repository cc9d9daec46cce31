package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class SchedulingSafetyTest {
    final ManualClock clock = new ManualClock(Instant.parse("2026-03-01T00:00:00Z"));
    final List<AllocationEvent> events = new CopyOnWriteArrayList<>();

    SimulatedGpuInventory node(boolean processes) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("safety").tracksProcesses(processes);
        for (int i = 0; i < 4; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-s-" + i).vendor(GpuVendor.NVIDIA).name("NVIDIA A10")
                    .memory(MemorySize.ofGibibytes(24)).pciBusId("b" + i).numaNode(0).minor(i).build());
        }
        return b.build();
    }

    GpuScheduler scheduler(GpuInventory inv, GpuConfig config) {
        return GpuScheduler.builder().inventory(inv).clock(clock).config(config).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).listener(events::add).build();
    }

    List<AllocationEvent.Type> types() {
        return events.stream().map(AllocationEvent::type).toList();
    }

    @Test
    void leasesExpireOnTheInjectedClockAndCanBeRenewed() {
        GpuScheduler s = scheduler(node(false), GpuConfig.defaults());
        Allocation a = s.allocate(GpuRequest.builder().maxDuration(Duration.ofMinutes(10)).owner("alice").build());
        assertThat(a.expiresAt()).contains(clock.instant().plus(Duration.ofMinutes(10)));
        clock.advance(Duration.ofMinutes(9));
        s.maintain();
        assertThat(types()).doesNotContain(AllocationEvent.Type.EXPIRED);
        Allocation renewed = s.renew(a.id(), Duration.ofMinutes(5));
        assertThat(renewed.expiresAt()).contains(clock.instant().plus(Duration.ofMinutes(5)));
        clock.advance(Duration.ofMinutes(6));
        s.maintain();
        s.maintain();
        assertThat(types()).containsOnlyOnce(AllocationEvent.Type.EXPIRED);
        assertThat(s.allocation(a.id())).as("not configured to release: the host kills the job").isPresent();
        assertThat(events.stream().filter(e -> e.type() == AllocationEvent.Type.EXPIRED).findFirst().get().owner())
                .contains("alice");
        s.release(a.id());
        assertThatThrownBy(() -> s.renew(a.id(), Duration.ofMinutes(1))).hasMessageContaining("it was released");
        assertThat(s.status().allocations()).isEmpty();
    }

    @Test
    void expiredLeasesAreReleasedWhenConfigured() {
        GpuScheduler s = scheduler(node(false), GpuConfig.builder().releaseOnExpiry(true).build());
        Allocation a = s.allocate(GpuRequest.builder().count(4).maxDuration(Duration.ofSeconds(30)).build());
        clock.advance(Duration.ofSeconds(31));
        s.maintain();
        assertThat(s.allocation(a.id())).isEmpty();
        assertThat(types()).containsSubsequence(AllocationEvent.Type.EXPIRED, AllocationEvent.Type.RELEASED);
        assertThat(s.allocate(GpuRequest.builder().count(4).build()).devices()).hasSize(4);
    }

    @Test
    void releasedDevicesDrainThenReturnOrAreQuarantined() {
        SimulatedGpuInventory inv = node(true);
        GpuScheduler s = scheduler(inv, GpuConfig.builder().drainTimeout(Duration.ofMinutes(2)).build());
        Allocation a = s.allocate(GpuRequests.fromCliFlags("--devices=0,1"));
        inv.setProcesses(0, List.of(new GpuProcess(4242, Optional.of(MemorySize.ofGibibytes(3)))));
        s.release(a.id());
        assertThat(s.devices().get(0).pool()).isEqualTo(DeviceState.Pool.DRAINING);
        assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--devices=1")))
                .hasMessageContaining("draining");
        assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(3).build()))
                .hasMessageContaining("2 draining");
        s.maintain();
        assertThat(s.devices().get(1).pool()).as("no process left").isEqualTo(DeviceState.Pool.IN_POOL);
        assertThat(s.devices().get(0).pool()).isEqualTo(DeviceState.Pool.DRAINING);
        clock.advance(Duration.ofMinutes(3));
        s.maintain();
        DeviceState q = s.devices().get(0);
        assertThat(q.pool()).isEqualTo(DeviceState.Pool.QUARANTINED);
        assertThat(q.poolReason()).contains("pid 4242 still holds 3 GiB");
        assertThat(types()).contains(AllocationEvent.Type.DRAINED, AllocationEvent.Type.QUARANTINED);
        GpuAllocationException e = (GpuAllocationException) org.assertj.core.api.Assertions.catchThrowable(
                () -> s.allocate(GpuRequests.fromCliFlags("--devices=0")));
        assertThat(e.reason()).isEqualTo(GpuAllocationException.Reason.DEVICE_UNHEALTHY);
        assertThat(s.status().devices().get(0).pool()).isEqualTo("QUARANTINED");
        assertThat(s.clearQuarantine(0)).isTrue();
        assertThat(s.clearQuarantine(0)).isFalse();
        assertThat(s.allocate(GpuRequests.fromCliFlags("--devices=0")).devices()).hasSize(1);
        assertThat(s.status().drainSupported()).isTrue();
    }

    @Test
    void inventoriesThatCannotListProcessesReleaseAtOnceAndSaySo() {
        GpuScheduler s = scheduler(node(false), GpuConfig.defaults());
        Allocation a = s.allocate(GpuRequest.builder().build());
        s.release(a.id());
        assertThat(s.devices()).allSatisfy(d -> assertThat(d.pool()).isEqualTo(DeviceState.Pool.IN_POOL));
        assertThat(s.status().drainSupported()).isFalse();
        assertThat(s.status().notes()).anySatisfy(n -> assertThat(n).contains("cannot list GPU processes"));
    }

    @Test
    void waitersAreServedFirstComeFirstServed() throws Exception {
        GpuScheduler s = scheduler(node(false), GpuConfig.defaults());
        Allocation all = s.allocate(GpuRequest.builder().count(4).build());
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<Allocation> big = pool.submit(
                    () -> s.allocate(GpuRequest.builder().count(3).owner("first").build(), Duration.ofMinutes(5)));
            awaitWaiting(s, 1);
            Future<Allocation> small = pool.submit(() -> s.allocate(GpuRequest.builder().count(2).owner("second")
                    .build(), Duration.ofMinutes(5)));
            awaitWaiting(s, 2);
            assertThat(big.isDone()).isFalse();
            assertThat(small.isDone()).isFalse();
            s.release(all.id());
            Allocation b = big.get(30, TimeUnit.SECONDS);
            assertThat(b.owner()).contains("first");
            assertThat(b.devices()).hasSize(3);
            awaitWaiting(s, 1);
            assertThat(small.isDone()).as("second still waits: 1 GPU is free but it asked for 2").isFalse();
            s.release(b.id());
            assertThat(small.get(30, TimeUnit.SECONDS).devices()).hasSize(2);
        } finally {
            pool.shutdownNow();
        }
    }

    /** Waits until the scheduler reports {@code n} waiting allocations (an observed fact, not a guessed delay). */
    static void awaitWaiting(GpuScheduler s, long n) {
        while (((DefaultGpuScheduler) s).waiting() != n) {
            Thread.onSpinWait();
        }
    }

    /** A waiter whose attempt fails with a non-refusal error (a strategy bug) still hands the queue on. */
    @Test
    @org.junit.jupiter.api.Timeout(value = 10, unit = TimeUnit.MINUTES)
    void aWaiterThatFailsOtherwiseHandsTheQueueOn() throws Exception {
        AllocationStrategy buggyFor3 = new AllocationStrategy() {
            @Override
            public String name() {
                return "buggy-for-3";
            }

            @Override
            public List<Integer> select(GpuRequest r, SchedulingView v) {
                return r.count() == 3 ? List.of(99, 98, 97)
                        : v.candidates().stream().limit(r.count()).map(DeviceState::index).toList();
            }
        };
        SimulatedGpuInventory inv = node(false);
        GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(buggyFor3).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(3).build(), Duration.ofMinutes(5)))
                .isInstanceOf(GpuException.class).hasMessageContaining("a bug in the strategy");
        assertThat(s.allocate(GpuRequest.builder().count(2).build(), Duration.ofMinutes(5)).devices()).hasSize(2);
    }

    /** The timeout only guards against a permanent refusal waiting its hour; it asserts no speed. */
    @Test
    @org.junit.jupiter.api.Timeout(value = 10, unit = TimeUnit.MINUTES)
    void waitingGivesUpWithTheUsualReasonAndPermanentReasonsDoNotWait() throws Exception {
        GpuScheduler s = scheduler(node(false), GpuConfig.defaults());
        s.allocate(GpuRequest.builder().count(4).build());
        long t0 = System.nanoTime();
        Throwable t = org.assertj.core.api.Assertions.catchThrowable(
                () -> s.allocate(GpuRequest.builder().build(), Duration.ofMillis(200)));
        double observed = (System.nanoTime() - t0) / 1e9;
        assertThat(t).isInstanceOf(GpuAllocationException.class);
        assertThat(((GpuAllocationException) t).reason()).isEqualTo(GpuAllocationException.Reason.INSUFFICIENT_GPUS);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("gave up after waiting ([0-9.]+) s$")
                .matcher(t.getMessage());
        assertThat(m.find()).as(t.getMessage()).isTrue();
        assertThat(t.getMessage()).as("the wait is said once").doesNotContain("PT0.2S");
        double reported = Double.parseDouble(m.group(1));
        assertThat(reported).as("the wait reported is the wait observed").isGreaterThanOrEqualTo(0.2)
                .isLessThanOrEqualTo(observed + 0.001);
        assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(5).build(), Duration.ofHours(1)))
                .satisfies(e -> assertThat(((GpuAllocationException) e).reason())
                        .isEqualTo(GpuAllocationException.Reason.NODE_TOO_SMALL));
        assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--devices=9"), Duration.ofHours(1)))
                .satisfies(e -> assertThat(((GpuAllocationException) e).reason())
                        .isEqualTo(GpuAllocationException.Reason.UNKNOWN_DEVICE));
    }
}
