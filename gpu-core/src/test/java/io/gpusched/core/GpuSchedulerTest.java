package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.host.CgroupFixture;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class GpuSchedulerTest {

    private static final Set<Reason> PRODUCED = EnumSet.noneOf(Reason.class);
    private static final Clock CLOCK = Clock.fixed(Instant.parse("2026-01-02T03:04:05Z"), ZoneOffset.UTC);

    private SimulatedGpuInventory dgx;
    private final List<AllocationEvent> events = new CopyOnWriteArrayList<>();
    private GpuScheduler scheduler;

    @BeforeEach
    void setUp() {
        dgx = GpuInventories.simulated("dgx1-v100");
        scheduler = GpuScheduler.builder().inventory(dgx).clock(CLOCK).listener(events::add).build();
    }

    @AfterAll
    static void everyReasonIsProducedByATest() {
        Set<Reason> all = EnumSet.allOf(Reason.class);
        if (!cgroupsUsable()) {
            all.remove(Reason.JOB_RUNNING); // produced only with a real job cgroup (root)
        }
        assertThat(PRODUCED).containsExactlyInAnyOrderElementsOf(all);
    }

    private static boolean cgroupsUsable() {
        return CgroupFixture.root() && !CgroupFixture.hierarchies().isEmpty();
    }

    @Test
    void aReleaseWhileTheRecordedJobCgroupHasProcessesIsRefused() throws Exception {
        CgroupFixture.assumeUsable();
        try (CgroupFixture f = new CgroupFixture()) {
            Allocation a = scheduler.allocate(GpuRequest.builder().build());
            Path cg = f.mkdir(f.parent(CgroupFixture.hierarchies().get(0)).resolve(JobCgroups.name(a.id())));
            scheduler.recordJobCgroup(a.id(), cg);
            f.startJob(cg);
            GpuAllocationException e = (GpuAllocationException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> scheduler.release(a.id()));
            assertThat(e.reason()).isEqualTo(Reason.JOB_RUNNING);
            PRODUCED.add(e.reason());
        }
    }

    private GpuAllocationException refused(GpuScheduler s, GpuRequest r, Reason reason) {
        List<DeviceState> before = s.devices();
        List<Allocation> live = s.allocations();
        GpuAllocationException e = (GpuAllocationException) org.assertj.core.api.Assertions
                .catchThrowableOfType(GpuAllocationException.class, () -> s.allocate(r));
        assertThat(e).as("allocate(%s) should fail with %s", r, reason).isNotNull();
        assertThat(e.reason()).as(e.getMessage()).isEqualTo(reason);
        assertThat(s.devices()).as("a refused allocation changes no state").isEqualTo(before);
        assertThat(s.allocations()).isEqualTo(live);
        PRODUCED.add(reason);
        return e;
    }

    @Test
    void allocatesAndReleases() {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=2", "--gpu-memory=16GB", "--owner=alice"));
        assertThat(a.devices()).hasSize(2);
        assertThat(a.createdAt()).isEqualTo(CLOCK.instant());
        assertThat(scheduler.allocations()).containsExactly(a);
        assertThat(scheduler.allocation(a.id())).contains(a);
        for (int i : a.deviceIndices()) {
            assertThat(scheduler.devices().get(i).exclusiveHolder()).contains(a.id());
        }
        assertThat(scheduler.release(a.id())).isTrue();
        assertThat(scheduler.allocations()).isEmpty();
        assertThat(scheduler.devices()).allSatisfy(d -> assertThat(d.isIdle()).isTrue());
    }

    @Test
    void doubleReleaseIsANoOpReportedAsFalse() {
        Allocation a = scheduler.allocate(GpuRequest.builder().build());
        assertThat(scheduler.release(a.id())).isTrue();
        assertThat(scheduler.release(a.id())).isFalse();
        assertThat(events).filteredOn(e -> e.type() == AllocationEvent.Type.RELEASED).hasSize(1);
    }

    @Test
    void unknownReleaseIsAClearError() {
        scheduler.allocate(GpuRequest.builder().build());
        assertThatThrownBy(() -> scheduler.release("alloc-from-elsewhere"))
                .isInstanceOf(GpuAllocationException.class)
                .hasMessageContaining("no allocation \"alloc-from-elsewhere\" was issued by this node")
                .satisfies(e -> PRODUCED.add(((GpuAllocationException) e).reason()))
                .satisfies(e -> assertThat(((GpuAllocationException) e).reason()).isEqualTo(Reason.UNKNOWN_ALLOCATION));
        String id = scheduler.allocations().get(0).id();
        String future = id.substring(0, id.lastIndexOf('-') + 1) + "999";
        assertThatThrownBy(() -> scheduler.release(future)).isInstanceOf(GpuAllocationException.class);
    }

    @Test
    void insufficientGpus() {
        scheduler.allocate(GpuRequest.builder().count(7).build());
        GpuAllocationException e = refused(scheduler, GpuRequest.builder().count(2).build(), Reason.INSUFFICIENT_GPUS);
        assertThat(e.getMessage()).contains("2 GPUs requested; 1 of 8 suitable GPUs are free");
        GpuAllocationException tooMany = refused(scheduler, GpuRequest.builder().count(9).build(),
                Reason.NODE_TOO_SMALL);
        assertThat(tooMany.getMessage()).contains("this node has 8 GPUs in all");
        assertThat(Reason.NODE_TOO_SMALL.isTransient()).as("9 on 8 can never succeed").isFalse();
        assertThatThrownBy(() -> scheduler.tryAllocate(GpuRequest.builder().count(9).build()))
                .as("tryAllocate throws for a permanent refusal instead of returning empty")
                .isInstanceOf(GpuAllocationException.class);
    }

    @Test
    void insufficientMemorySaysWhatTheNodeHas() {
        GpuAllocationException e = refused(scheduler,
                GpuRequests.fromCliFlags("--gpu=2", "--gpu-memory=40GB"), Reason.INSUFFICIENT_MEMORY);
        assertThat(e.getMessage()).isEqualTo(
                "2 GPUs (>= 40 GiB) requested; 8 free, none has enough memory (the largest has 32 GiB)");
        refused(scheduler, GpuRequests.fromCliFlags("--shared=33GB"), Reason.INSUFFICIENT_MEMORY);
    }

    @Test
    void noMatchingDevice() {
        GpuAllocationException e = refused(scheduler, GpuRequests.fromCliFlags("--min-cc=8.0"),
                Reason.NO_MATCHING_DEVICE);
        assertThat(e.getMessage()).contains("0 of the node's 8 GPUs match")
                .contains("8x NVIDIA Tesla V100-SXM2-32GB 32 GiB cc 7.0");
        refused(scheduler, GpuRequests.fromCliFlags("--vendor=amd"), Reason.NO_MATCHING_DEVICE);
        refused(scheduler, GpuRequests.fromCliFlags("--model=*A100*"), Reason.NO_MATCHING_DEVICE);
        refused(scheduler, GpuRequests.fromCliFlags("--devices=1", "--min-cc=9.0"), Reason.NO_MATCHING_DEVICE);
        assertThat(scheduler.allocate(GpuRequests.fromCliFlags("--model=*v100*", "--vendor=NVIDIA")).devices())
                .hasSize(1);
    }

    @Test
    void unknownDevice() {
        GpuAllocationException e = refused(scheduler, GpuRequests.fromCliFlags("--devices=8"), Reason.UNKNOWN_DEVICE);
        assertThat(e.getMessage()).contains("GPU index 8 is not on this node").contains("[0,1,2,3,4,5,6,7]");
        refused(scheduler, GpuRequests.fromCliFlags("--uuids=GPU-nope"), Reason.UNKNOWN_DEVICE);
    }

    @Test
    void explicitDevicesByIndexAndUuid() {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--target=node1::5,2"));
        assertThat(a.deviceIndices()).containsExactly(5, 2);
        String uuid = dgx.devices().get(7).uuid();
        Allocation b = scheduler.allocate(GpuRequest.builder().deviceUuids(List.of(uuid)).build());
        assertThat(b.deviceIndices()).containsExactly(7);
    }

    @Test
    void deviceBusy() {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--devices=3"));
        GpuAllocationException e = refused(scheduler, GpuRequests.fromCliFlags("--devices=3"), Reason.DEVICE_BUSY);
        assertThat(e.getMessage()).contains("GPU 3").contains("by " + a.id());
        refused(scheduler, GpuRequests.fromCliFlags("--devices=3", "--shared=1GB"), Reason.DEVICE_BUSY);
        scheduler.allocate(GpuRequests.fromCliFlags("--devices=4", "--shared=30GB"));
        refused(scheduler, GpuRequests.fromCliFlags("--devices=4", "--shared=4GB"), Reason.DEVICE_BUSY);
        refused(scheduler, GpuRequests.fromCliFlags("--devices=4"), Reason.DEVICE_BUSY);
    }

    @Test
    void unhealthyDevicesAreNeverHandedOut() {
        dgx.setHealth(2, GpuHealth.unhealthy("XID 79"));
        GpuAllocationException e = refused(scheduler, GpuRequests.fromCliFlags("--devices=2"),
                Reason.DEVICE_UNHEALTHY);
        assertThat(e.getMessage()).contains("XID 79");
        for (int i = 3; i < 8; i++) {
            dgx.setHealth(i, GpuHealth.lost("fell off the bus"));
        }
        refused(scheduler, GpuRequest.builder().count(3).build(), Reason.DEVICE_UNHEALTHY);
        Allocation two = scheduler.allocate(GpuRequest.builder().count(2).build());
        assertThat(two.deviceIndices()).containsExactlyInAnyOrder(0, 1);
        dgx.setHealth(2, GpuHealth.HEALTHY);
        assertThat(scheduler.allocate(GpuRequest.builder().build()).deviceIndices()).containsExactly(2);
    }

    @Test
    void healthChangeUnderAnAllocationIsReported() {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--devices=6"));
        dgx.setHealth(6, GpuHealth.unhealthy("XID 48"));
        assertThat(events).filteredOn(e -> e.type() == AllocationEvent.Type.HEALTH_CHANGED).singleElement()
                .satisfies(e -> {
                    assertThat(e.allocationId()).contains(a.id());
                    assertThat(e.message()).contains("XID 48");
                });
        assertThat(scheduler.devices().get(6).health().isHealthy()).isFalse();
    }

    @Test
    void disabledAndInvalidByConfiguration() {
        GpuScheduler off = GpuScheduler.builder().inventory(dgx)
                .config(GpuConfig.builder().enabled(false).build()).build();
        assertThat(refused(off, GpuRequest.builder().build(), Reason.DISABLED).getMessage())
                .contains("gpu.enabled: false");
        GpuScheduler strict = GpuScheduler.builder().inventory(dgx)
                .config(GpuConfig.builder().maxGpusPerRequest(2).allowSharing(false).build()).build();
        assertThat(refused(strict, GpuRequest.builder().count(3).build(), Reason.INVALID_REQUEST).getMessage())
                .contains("at most 2");
        assertThat(refused(strict, GpuRequests.fromCliFlags("--shared=1GB"), Reason.INVALID_REQUEST).getMessage())
                .contains("gpu.allow_sharing");
    }

    @Test
    void rateLimitedPerOwnerOnTheSchedulerClock() {
        ManualClock clock = new ManualClock(CLOCK.instant());
        GpuScheduler s = GpuScheduler.builder().inventory(dgx).clock(clock).auditLogging(false)
                .config(GpuConfig.builder().rateLimit(2, 2).build()).build();
        GpuRequest alice = GpuRequests.fromCliFlags("--owner=alice", "--shared=1GB");
        s.allocate(alice);
        s.allocate(alice);
        GpuAllocationException e = refused(s, alice, Reason.RATE_LIMITED);
        assertThat(e.getMessage()).contains("owner alice is over its rate limit of 2.0 allocations/s (burst 2)")
                .contains("retry in 500 ms");
        s.allocate(GpuRequests.fromCliFlags("--owner=bob", "--shared=1GB"));
        clock.advance(java.time.Duration.ofMillis(500));
        s.allocate(alice);
    }

    @Test
    void quotaExceededNamesTheLimitItsSourceAndWhatTheUserHolds() {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, java.util.Map.of(), java.util.Map.of()))
                .build();
        GpuScheduler s = GpuScheduler.builder().inventory(dgx).clock(CLOCK).config(config).build();
        Allocation held = s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=alice"));
        GpuAllocationException e = refused(s, GpuRequests.fromCliFlags("--gpu=2", "--owner=alice"),
                Reason.QUOTA_EXCEEDED);
        assertThat(e.getMessage()).contains("alice").contains("holds 2 GPU(s)").contains(held.id())
                .contains("the limit is 3").contains("gpu.users.max_gpus");
        assertThat(Reason.QUOTA_EXCEEDED.isTransient()).as("it may pass once alice releases").isTrue();
        s.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=alice"));
        s.allocate(GpuRequests.fromCliFlags("--gpu=3", "--owner=bob"));
        s.release(held.id());
        s.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=alice"));
    }

    @Test
    void noPlacementWhenTheStrategyDeclines() {
        AllocationStrategy never = new AllocationStrategy() {
            @Override
            public String name() { return "never"; }
            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) { return List.of(); }
        };
        GpuScheduler s = GpuScheduler.builder().inventory(dgx).strategy(never).build();
        assertThat(refused(s, GpuRequest.builder().build(), Reason.NO_PLACEMENT).getMessage())
                .contains("strategy never found no placement");
    }

    @Test
    void aBuggyStrategyIsCaughtAndChangesNothing() {
        AllocationStrategy dup = new AllocationStrategy() {
            @Override
            public String name() { return "dup"; }
            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) { return List.of(0, 0); }
        };
        GpuScheduler s = GpuScheduler.builder().inventory(dgx).strategy(dup).build();
        assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(2).build()))
                .isInstanceOf(GpuException.class).hasMessageContaining("a bug in the strategy");
        assertThat(s.devices()).allSatisfy(d -> assertThat(d.isIdle()).isTrue());
    }

    @Test
    void tryAllocateReturnsEmptyOnlyForTransientRefusals() {
        scheduler.allocate(GpuRequest.builder().count(8).build());
        assertThat(scheduler.tryAllocate(GpuRequest.builder().build())).isEmpty();
        assertThatThrownBy(() -> scheduler.tryAllocate(GpuRequests.fromCliFlags("--devices=9")))
                .isInstanceOf(GpuAllocationException.class);
    }

    @Test
    void sharedReservationsAddUpAndRelease() {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--shared=10GB"));
        Allocation b = scheduler.allocate(GpuRequests.fromCliFlags("--shared=10GB"));
        assertThat(b.deviceIndices()).as("packing fills the shared GPU first").isEqualTo(a.deviceIndices());
        DeviceState d = scheduler.devices().get(a.deviceIndices().get(0));
        assertThat(d.sharedHolders()).isEqualTo(2);
        assertThat(d.reservableMemory()).isEqualTo(MemorySize.ofGibibytes(12));
        Allocation c = scheduler.allocate(GpuRequests.fromCliFlags("--shared=16GB"));
        assertThat(c.deviceIndices()).isNotEqualTo(a.deviceIndices());
        scheduler.release(a.id());
        scheduler.release(b.id());
        assertThat(scheduler.devices().get(a.deviceIndices().get(0)).isIdle()).isTrue();
    }

    @Test
    void listenersHearEveryEventAndCannotBreakTheScheduler() {
        List<AllocationEvent> seen = new ArrayList<>();
        GpuScheduler s = GpuScheduler.builder().inventory(dgx).clock(CLOCK)
                .listener(e -> {
                    throw new IllegalStateException("listener bug");
                })
                .listener(seen::add).build();
        Allocation a = s.allocate(GpuRequests.fromCliFlags("--owner=bob", "--job=j1"));
        assertThatThrownBy(() -> s.allocate(GpuRequests.fromCliFlags("--gpu=9", "--owner=bob")));
        s.release(a.id());
        assertThat(seen).extracting(AllocationEvent::type).containsExactly(AllocationEvent.Type.ALLOCATED,
                AllocationEvent.Type.REJECTED, AllocationEvent.Type.RELEASED);
        assertThat(seen.get(0).owner()).contains("bob");
        assertThat(seen.get(0).jobId()).contains("j1");
        assertThat(seen.get(0).deviceUuids()).isEqualTo(a.deviceUuids());
        assertThat(seen.get(1).reason()).contains(Reason.NODE_TOO_SMALL);
        assertThat(Slf4jAllocationListener.format(seen.get(0)))
                .startsWith("event=ALLOCATED at=2026-01-02T03:04:05Z id=" + a.id() + " owner=bob job=j1 uuids=[GPU-");
    }

    @Test
    void statusIsJson() throws Exception {
        Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=carol", "--label=k=v"));
        Allocation s = scheduler.allocate(GpuRequests.fromCliFlags("--shared=8GB"));
        dgx.setMetrics(0, 55, MemorySize.ofGibibytes(3), 61, 180);
        scheduler.updateMetrics(dgx.sample());
        JsonNode root = new ObjectMapper().readTree(scheduler.statusJson());
        assertThat(root.get("backend").asText()).isEqualTo("simulated:dgx1-v100");
        assertThat(root.get("devices")).hasSize(8);
        assertThat(root.get("allocations")).hasSize(2);
        JsonNode held = root.get("allocations").get(0);
        assertThat(held.get("id").asText()).isEqualTo(a.id());
        assertThat(held.get("owner").asText()).isEqualTo("carol");
        assertThat(held.get("labels").get("k").asText()).isEqualTo("v");
        JsonNode d0 = root.get("devices").get(0);
        assertThat(d0.get("utilizationPercent").asDouble()).isEqualTo(55.0);
        assertThat(d0.get("temperatureCelsius").asDouble()).isEqualTo(61.0);
        int sharedIdx = s.deviceIndices().get(0);
        JsonNode ds = root.get("devices").get(sharedIdx);
        assertThat(ds.get("sharedBy").get(0).asText()).isEqualTo(s.id());
        assertThat(ds.get("reservableBytes").asLong()).isEqualTo(MemorySize.ofGibibytes(24).bytes());
    }

    @Test
    void builderFailsFast() {
        assertThatThrownBy(() -> GpuScheduler.builder().build()).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("needs an inventory");
        assertThatThrownBy(() -> GpuScheduler.builder().inventory(dgx).inventory(dgx))
                .hasMessageContaining("already set");
        assertThatThrownBy(() -> GpuScheduler.builder().metricsPollInterval(java.time.Duration.ZERO))
                .hasMessageContaining("positive");
    }

    @Test
    void pollerFeedsMetrics() throws Exception {
        dgx.setMetrics(1, 77, MemorySize.ZERO, 40, 100);
        // The poller runs with a fixed delay on one thread, so its second sample() call starts only after the first
        // sample was handed to the scheduler: waiting for that call is an observed fact, not a time budget.
        java.util.concurrent.CountDownLatch twoSamples = new java.util.concurrent.CountDownLatch(2);
        GpuInventory counting = new GpuInventory() {
            @Override
            public String backend() { return dgx.backend(); }
            @Override
            public List<GpuDevice> devices() { return dgx.devices(); }
            @Override
            public GpuTopology topology() { return dgx.topology(); }
            @Override
            public GpuSample sample() {
                GpuSample sample = dgx.sample();
                twoSamples.countDown();
                return sample;
            }
            @Override
            public void close() {}
        };
        try (GpuScheduler s = GpuScheduler.builder().inventory(counting)
                .metricsPollInterval(java.time.Duration.ofMillis(5)).build()) {
            // the bound only stops a hung poller from hanging the build; it is not what the test checks
            assertThat(twoSamples.await(5, java.util.concurrent.TimeUnit.MINUTES)).as("poller ran twice").isTrue();
            assertThat(s.devices().get(1).utilization()).isEqualTo(77.0);
        }
    }

    @Test
    void configuredStrategyIsUsed() {
        GpuScheduler s = GpuScheduler.builder().inventory(dgx)
                .config(GpuConfig.builder().strategy("spreading").build()).build();
        assertThat(s.strategy().name()).isEqualTo("spreading");
        assertThat(s.toString()).contains("spreading");
    }
}
