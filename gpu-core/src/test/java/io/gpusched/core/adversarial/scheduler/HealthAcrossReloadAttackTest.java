package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Health and metrics are process-local facts kept beside the node ledger's state. When another process compacts the
 * ledger, this process reloads the whole file into a fresh state: the sick GPU must stay sick there (and never be
 * handed out), its metrics must survive, and the cached snapshot must show the reloaded state.
 */
@Tag("adversarial")
class HealthAcrossReloadAttackTest {

    @TempDir
    Path tmp;

    private static GpuScheduler open(Node node, Path dir) {
        return GpuScheduler.builder().inventory(node).auditLogging(false).maintenanceInterval(Duration.ZERO)
                .stateDir(dir).build();
    }

    private static Object fileKey(Path f) {
        try {
            return java.nio.file.Files.readAttributes(f, java.nio.file.attribute.BasicFileAttributes.class).fileKey();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void aSickGpuStaysSickWhenAnotherProcessCompactsTheLedger() {
        String old = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "2048");
        Path dir = tmp.resolve("state");
        Node nodeA = Node.uniform(4);
        Node nodeB = Node.uniform(4);
        try (GpuScheduler a = open(nodeA, dir); GpuScheduler b = open(nodeB, dir)) {
            Object before = fileKey(dir.resolve("ledger"));
            nodeA.change(1, GpuHealth.lost("XID 79"));
            Instant at = Instant.parse("2026-02-01T00:00:00Z");
            a.updateMetrics(new GpuSample(at, List.of(GpuMetrics.of(2, 42, MemorySize.ofGibibytes(3), 55, 200, at))));
            for (int i = 0; i < 40; i++) {
                Allocation x = b.allocate(GpuRequest.builder().deviceIndices(3).build());
                b.release(x.id());
            }
            Allocation held = b.allocate(GpuRequest.builder().deviceIndices(0).build());
            assertThat(fileKey(dir.resolve("ledger"))).as("b compacted: the ledger is a new file").isNotEqualTo(before);
            // a catches up (the file was replaced by b's compaction: a full reload)
            var devices = a.devices();
            assertThat(devices.get(1).health().isHealthy()).as("GPU 1 after the reload").isFalse();
            assertThat(devices.get(2).metrics()).as("GPU 2 metrics after the reload").isPresent();
            assertThat(devices.get(2).utilization()).isEqualTo(42.0);
            assertThat(devices.get(0).exclusiveHolder()).contains(held.id());
            assertThat(a.allocations()).extracting(Allocation::id).containsExactly(held.id());
            Allocation mine = a.allocate(GpuRequest.builder().count(2).build());
            assertThat(mine.deviceIndices()).containsExactlyInAnyOrder(2, 3);
            a.release(mine.id());
            assertThatThrownBy(() -> a.allocate(GpuRequest.builder().count(4).build()))
                    .isInstanceOfSatisfying(GpuAllocationException.class, e -> assertThat(e.reason())
                            .isEqualTo(GpuAllocationException.Reason.DEVICE_UNHEALTHY));
            // b's inventory never saw GPU 1 fail: health is not shared through the ledger, b may use it
            assertThat(b.devices().get(1).health().isHealthy()).isTrue();
        } finally {
            if (old == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", old);
            }
        }
    }
}
