package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Drain support decided from a hostile backend: one that answers "cannot list" for healthy GPUs means no drain; one
 * whose GPUs were all lost at build must not hand out a GPU that came back with its previous job's processes still on
 * it, however soon after it came back the release happens.
 */
@Tag("adversarial")
class DrainProbeAttackTest {

    private static GpuScheduler build(Node node) {
        return GpuScheduler.builder().inventory(node).auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void aBackendThatCannotListProcessesOfHealthyGpusMeansNoDrain() {
        Node node = Node.uniform(3);
        node.processes = d -> Optional.empty();
        try (GpuScheduler s = build(node)) {
            assertThat(s.status().drainSupported()).isFalse();
            assertThat(s.status().notes()).noneMatch(n -> n.contains("has answered a process listing yet"));
            Allocation a = s.allocate(GpuRequest.builder().deviceIndices(1).build());
            s.release(a.id());
            assertThat(s.devices().get(1).pool()).isEqualTo(DeviceState.Pool.IN_POOL);
            assertThat(s.allocate(GpuRequest.builder().deviceIndices(1).build()).deviceIndices()).containsExactly(1);
        }
    }

    @Test
    void aSickGpuThatFailsToListDoesNotTurnDrainOffForTheHealthyOnes() {
        Node node = Node.uniform(3);
        node.setQuietly(0, GpuHealth.lost("XID 79"));
        node.processes = d -> {
            if (d.index() == 0) {
                throw new IllegalStateException("GPU is lost");
            }
            return Optional.of(d.index() == 2 ? List.of(new GpuProcess(77, Optional.empty())) : List.of());
        };
        try (GpuScheduler s = build(node)) {
            assertThat(s.status().drainSupported()).isTrue();
            Allocation a = s.allocate(GpuRequest.builder().deviceIndices(2).build());
            s.release(a.id());
            assertThat(s.devices().get(2).pool()).isEqualTo(DeviceState.Pool.DRAINING);
        }
    }

    /**
     * Every GPU lost at build (listing fails): drain is undecided. GPU 1 comes back (the listener says so) and lists a
     * process of its job. Its job is released before any maintenance ran: it must drain, not go straight back to the
     * pool to be handed to the next job with the process still on it.
     */
    @Test
    void allLostAtBuildThenOneBackAndReleasedBeforeMaintenanceDrains() {
        Node node = Node.uniform(3);
        for (int i = 0; i < 3; i++) {
            node.setQuietly(i, GpuHealth.lost("XID 79"));
        }
        boolean[] back = new boolean[3];
        int[] asked = new int[3];
        node.processes = d -> {
            asked[d.index()]++;
            if (!back[d.index()]) {
                throw new IllegalStateException("GPU_IS_LOST");
            }
            return Optional.of(List.of(new GpuProcess(4242, Optional.empty())));
        };
        try (GpuScheduler s = build(node)) {
            assertThat(s.status().drainSupported()).isFalse();
            back[1] = true;
            node.change(1, GpuHealth.HEALTHY);
            Allocation a = s.allocate(GpuRequest.builder().count(1).build());
            assertThat(a.deviceIndices()).containsExactly(1);
            int[] before = asked.clone();
            s.release(a.id());
            // the release asks its own GPU, not the lost ones (a lost GPU may take seconds to answer)
            assertThat(asked[0]).isEqualTo(before[0]);
            assertThat(asked[2]).isEqualTo(before[2]);
            assertThat(s.devices().get(1).pool()).as("GPU 1 after its job, whose process is still listed")
                    .isEqualTo(DeviceState.Pool.DRAINING);
            try {
                Allocation b = s.allocate(GpuRequest.builder().count(1).build());
                throw new AssertionError("handed out " + b.deviceIndices() + " with the last job's process on it");
            } catch (GpuAllocationException e) {
                assertThat(e.reason().isTransient()).isTrue();
            }
            assertThat(s.status().drainSupported()).isTrue();
        }
    }
}
