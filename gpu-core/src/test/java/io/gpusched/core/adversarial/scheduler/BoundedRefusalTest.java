package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.ComputeCapability;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Obstacle;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Refusals on a 1,024-GPU node stay short: counts by kind and the first few ids, never every held GPU (which was tens
 * of KB in one message); {@link GpuAllocationException#obstacles()} keeps the full list, checked here against what
 * the test itself did to the node. A small node's refusal still names each GPU as it always has.
 */
@Tag("adversarial")
class BoundedRefusalTest {

    /** The stated bound: a refusal on a 1,024-GPU node is at most this many characters. */
    static final int MAX_MESSAGE = 1_000;
    private static final int N = 1_024;

    private static SimulatedGpuInventory node(int n) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("big-" + n);
        for (int i = 0; i < n; i++) {
            b.device(GpuDevice.builder().index(i).uuid(String.format("GPU-bounded-refusal-%08d", i))
                    .vendor(GpuVendor.NVIDIA).name("NVIDIA A100-SXM4-80GB").memory(MemorySize.ofGibibytes(80))
                    .computeCapability(new ComputeCapability(8, 0)).pciBusId(String.format("%08X:01:00.0", i))
                    .minor(i).build());
        }
        return b.build();
    }

    private static GpuScheduler scheduler(SimulatedGpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).config(GpuConfig.builder().strategy("packing").build()).build();
    }

    private static GpuAllocationException refusal(GpuScheduler s, GpuRequest r, Reason reason) {
        Throwable[] caught = new Throwable[1];
        assertThatThrownBy(() -> s.allocate(r, Duration.ZERO)).isInstanceOfSatisfying(GpuAllocationException.class,
                e -> {
                    assertThat(e.reason()).as(e.getMessage()).isEqualTo(reason);
                    caught[0] = e;
                });
        return (GpuAllocationException) caught[0];
    }

    @Test
    void aRefusalOnAThousandHeldGpusSummarizesAndKeepsEveryOneInItsFields() throws Exception {
        SimulatedGpuInventory inv = node(N);
        try (GpuScheduler s = scheduler(inv)) {
            List<String> holders = new ArrayList<>();
            for (int k = 0; k < 8; k++) {
                holders.add(s.allocate(GpuRequest.builder().count(N / 8 - (k == 7 ? 4 : 0)).owner("u" + k).build(),
                        Duration.ZERO).id());
            }
            s.allocate(GpuRequest.builder().count(4).shared(MemorySize.ofGibibytes(79)).owner("sharer").build(),
                    Duration.ZERO);
            GpuAllocationException e = refusal(s, GpuRequest.builder().count(1).build(), Reason.INSUFFICIENT_GPUS);
            String m = e.getMessage();
            assertThat(m.length()).as("a 1,024-GPU refusal is under %d characters: %s", MAX_MESSAGE, m)
                    .isLessThanOrEqualTo(MAX_MESSAGE);
            assertThat(m).contains("1024 GPUs (1020 held exclusively, 4 shared)").contains("GPU 0 by " + holders.get(0))
                    .contains("1020 more").doesNotContain("GPU 5 by").doesNotContain("GPU 1023");
            List<Obstacle> all = e.obstacles();
            assertThat(all).extracting(Obstacle::deviceIndex).containsExactlyElementsOf(
                    IntStream.range(0, N).boxed().toList());
            assertThat(all.stream().filter(o -> o.kind() == Obstacle.Kind.HELD)).hasSize(N - 4)
                    .allSatisfy(o -> assertThat(holders).contains(o.detail()));
            assertThat(all.stream().filter(o -> o.kind() == Obstacle.Kind.SHARED)).hasSize(4);
            assertThat(all).allSatisfy(o -> assertThat(o.uuid())
                    .isEqualTo(String.format("GPU-bounded-refusal-%08d", o.deviceIndex())));
        }
    }

    @Test
    void aThousandUnhealthyGpusAreCountedNotListed() {
        SimulatedGpuInventory inv = node(N);
        for (int i = 0; i < N; i++) {
            inv.setHealth(i, GpuHealth.unhealthy("XID 79 on GPU " + i + " " + "x".repeat(500)));
        }
        try (GpuScheduler s = scheduler(inv)) {
            GpuAllocationException e = refusal(s, GpuRequest.builder().count(1).build(), Reason.DEVICE_UNHEALTHY);
            assertThat(e.getMessage().length()).as(e.getMessage()).isLessThanOrEqualTo(MAX_MESSAGE);
            assertThat(e.getMessage()).contains("1024 GPUs (1024 unhealthy)").contains("1020 more");
            assertThat(e.obstacles()).hasSize(N).allSatisfy(o -> {
                assertThat(o.kind()).isEqualTo(Obstacle.Kind.UNHEALTHY);
                assertThat(o.detail()).contains("XID 79 on GPU " + o.deviceIndex() + " ").hasSizeGreaterThan(500);
            });
        }
    }

    @Test
    void anUnknownDeviceOnALargeNodeNamesTheNodesIdsInShort() {
        try (GpuScheduler s = scheduler(node(N))) {
            GpuAllocationException byIndex = refusal(s, GpuRequest.builder().deviceIndices(5000).build(),
                    Reason.UNKNOWN_DEVICE);
            assertThat(byIndex.getMessage()).contains("[0-1023] (1024 in all)").hasSizeLessThan(MAX_MESSAGE);
            GpuAllocationException byUuid = refusal(s, GpuRequest.builder().deviceUuids(List.of("GPU-nope")).build(),
                    Reason.UNKNOWN_DEVICE);
            assertThat(byUuid.getMessage()).contains("GPU-bounded-refusal-00000000").contains("1020 more (1024 in all)")
                    .doesNotContain("GPU-bounded-refusal-00000004").hasSizeLessThan(MAX_MESSAGE);
        }
    }

    @Test
    void aSmallNodeStillNamesEachHeldGpu() throws Exception {
        try (GpuScheduler s = scheduler(node(4))) {
            String a = s.allocate(GpuRequest.builder().count(3).build(), Duration.ZERO).id();
            String b = s.allocate(GpuRequest.builder().count(1).shared(MemorySize.ofGibibytes(70)).build(),
                    Duration.ZERO).id();
            GpuAllocationException e = refusal(s, GpuRequest.builder().count(1).build(), Reason.INSUFFICIENT_GPUS);
            assertThat(e.getMessage()).contains("(held: GPU 0 by " + a + "; GPU 1 by " + a + "; GPU 2 by " + a
                    + "; GPU 3 shared by 1, 10 GiB left)");
            assertThat(e.obstacles()).hasSize(4);
            assertThat(b).isNotEmpty();
            GpuAllocationException idx = refusal(s, GpuRequest.builder().deviceIndices(9).build(),
                    Reason.UNKNOWN_DEVICE);
            assertThat(idx.getMessage()).contains("its GPU indices are [0,1,2,3]");
        }
    }
}
