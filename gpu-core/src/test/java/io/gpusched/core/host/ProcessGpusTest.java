package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Per-JVM holdings: two components of one kind get disjoint GPUs, asking again keeps the set, another ask gives the
 * old one back, release frees it on the node (checked by a second scheduler on the same ledger, not by the helper).
 */
class ProcessGpusTest {

    @AfterEach
    void cleanUp() {
        ProcessGpus.releaseAll();
    }

    private static GpuRequest req(int n) {
        return GpuRequest.builder().count(n).holder(HolderProcess.current()).build();
    }

    private static GpuNode observer(Path dir) {
        return GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void componentsGetDisjointGpusAndGiveThemBack(@TempDir Path dir) {
        ProcessGpus.NodeKey node = new ProcessGpus.NodeKey(InventorySpec.parse("simulated:dgx1-v100"),
                Optional.of(dir), "topology");
        Allocation w1 = ProcessGpus.acquire("spark.worker/gpu#1", node, req(4));
        Allocation w2 = ProcessGpus.acquire("spark.worker/gpu#2", node, req(4));
        Set<Integer> all = new HashSet<>(w1.deviceIndices());
        all.addAll(w2.deviceIndices());
        assertThat(all).hasSize(8);
        assertThat(ProcessGpus.acquire("spark.worker/gpu#1", node, req(4)).id()).as("asks again").isEqualTo(w1.id());
        try (GpuNode node2 = observer(dir)) {
            GpuScheduler obs = node2.scheduler();
            assertThat(obs.allocations()).extracting(Allocation::id).containsExactlyInAnyOrder(w1.id(), w2.id());
            assertThat(ProcessGpus.release("spark.worker/gpu#1")).isTrue();
            assertThat(ProcessGpus.release("spark.worker/gpu#1")).isFalse();
            obs.refresh();
            assertThat(obs.allocations()).extracting(Allocation::id).containsExactly(w2.id());
            Allocation smaller = ProcessGpus.acquire("spark.worker/gpu#2", node, req(2));
            assertThat(smaller.id()).as("another ask: the old set given back first").isNotEqualTo(w2.id());
            obs.refresh();
            assertThat(obs.allocations()).extracting(Allocation::id).containsExactly(smaller.id());
        }
    }

    @Test
    void aRefusedAskHoldsNothingAndAnUnboundRequestIsRejected(@TempDir Path dir) {
        ProcessGpus.NodeKey node = new ProcessGpus.NodeKey(InventorySpec.parse("simulated:dgx1-v100"),
                Optional.of(dir), "packing");
        assertThatThrownBy(() -> ProcessGpus.acquire("a", node, req(9))).isInstanceOf(GpuAllocationException.class);
        assertThat(ProcessGpus.held()).isEmpty();
        assertThatThrownBy(() -> ProcessGpus.acquire("a", node, GpuRequest.builder().count(1).build()))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bound to this process");
    }
}
