package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.sim.NodeDescriptions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Shared allocations (issue 36): a reservation below CUDA's MPS unit (1 MiB) is refused rather than becoming
 * {@code CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=0M}, and one GPU takes at most {@code gpu.max_shared_per_gpu} shared
 * allocations at once, refused with a typed reason naming the setting.
 */
class SharedReservationBoundsTest {

    private static GpuScheduler open(int maxShared) {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).auditLogging(false)
                .config(GpuConfig.builder().maxSharedPerGpu(maxShared).build()).maintenanceInterval(Duration.ZERO)
                .build();
    }

    @Test
    void reservationsBelowOneMebibyteAreRefusedWhereverTheyAreAskedFor() {
        for (String v : new String[]{"1B", "1000B", "512KiB", "1048575B"}) { // 0 is "more than 0 bytes", as before
            assertThatThrownBy(() -> GpuRequests.fromCliFlags("--shared=" + v))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1MiB").hasMessageContaining(v);
            assertThatThrownBy(() -> GpuRequest.builder().shared(MemorySize.parse(v)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("1 MiB");
        }
        assertThat(GpuRequests.fromCliFlags("--shared=1MiB").sharedMemory()).contains(MemorySize.ofMebibytes(1));
    }

    @Test
    void aLedgerRecordOfAnOlderWriterWithASmallerReservationStillReads() {
        GpuRequest r = GpuRequest.builder().sharedAsRecorded(MemorySize.ofBytes(1000)).build();
        LedgerRecord rec = new LedgerRecord.Allocated("a1b2c3-1", List.of("GPU-x"), r,
                Instant.parse("2026-01-01T00:00:00Z"), Optional.empty());
        LedgerRecord back = LedgerRecord.fromJson(LedgerRecord.toJson(rec));
        assertThat(((LedgerRecord.Allocated) back).request().sharedMemory()).contains(MemorySize.ofBytes(1000));
    }

    @Test
    void oneGpuTakesAtMostTheBoundOfSharedAllocations() {
        try (GpuScheduler s = open(3)) {
            GpuRequest one = GpuRequests.fromCliFlags("--devices=0", "--shared=1GiB");
            for (int i = 0; i < 3; i++) {
                s.allocate(one);
            }
            GpuAllocationException named = catchThrowableOfType(() -> s.allocate(one), GpuAllocationException.class);
            assertThat(named.reason()).isEqualTo(Reason.DEVICE_BUSY);
            assertThat(named.getMessage()).contains("gpu.max_shared_per_gpu").contains("at most 3");
            // any GPU: the others still take them, until all are at the bound
            GpuRequest any = GpuRequests.fromCliFlags("--gpu=1", "--shared=1GiB");
            for (int i = 0; i < 9; i++) {
                assertThat(s.allocate(any).deviceIndices()).doesNotContain(0);
            }
            GpuAllocationException full = catchThrowableOfType(() -> s.allocate(any), GpuAllocationException.class);
            assertThat(full.reason()).isEqualTo(Reason.INSUFFICIENT_GPUS);
            assertThat(full.getMessage()).contains("gpu.max_shared_per_gpu");
            assertThat(s.status().devices()).allSatisfy(d -> assertThat(d.sharedBy()).hasSize(3));
        }
    }
}
