package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;

/** The rules that turn NVML's answers into a per-process sample, without a library. */
class NvmlProcessUsageRulesTest {
    static final Instant AT = Instant.parse("2026-03-02T10:00:00Z");

    @Test
    void meanPerPidOverItsSamplesAndZeroForAListedProcessWithout() {
        ProcessUsageSample s = NvmlProcessUsage.combine(AT, List.of(new long[]{7, 100, -1, -1},
                new long[]{8, 200, -1, -1}), null,
                List.of(new long[]{7, 1, 30}, new long[]{7, 2, 50},
                        new long[]{9, 2, 5}),
                null);
        assertThat(s.processes()).containsExactly(
                new GpuProcessUsage(7, OptionalDouble.of(40), Optional.of(MemorySize.ofBytes(100))),
                new GpuProcessUsage(8, OptionalDouble.of(0), Optional.of(MemorySize.ofBytes(200))),
                new GpuProcessUsage(9, OptionalDouble.of(5), Optional.empty()));
        assertThat(s.utilizationUnmeasured()).isEmpty();
        assertThat(s.memoryUnmeasured()).isEmpty();
    }

    @Test
    void pidsTheKernelNeverGivesAreDroppedAndValuesPastAHundredReadAsAHundred() {
        ProcessUsageSample s = NvmlProcessUsage.combine(AT, List.of(new long[]{0, 1, 0, 0},
                new long[]{1L << 32, 1, 0, 0}, new long[]{5, 10, 0, 0}, new long[]{5, 20, 0, 0}), null,
                List.of(new long[]{5, 1, 4_000_000_000L}, new long[]{-3, 1, 10}), null);
        assertThat(s.processes()).containsExactly(new GpuProcessUsage(5, OptionalDouble.of(100),
                Optional.of(MemorySize.ofBytes(30))));
    }

    @Test
    void reasonsAreCarriedAndFiguresLeftEmpty() {
        ProcessUsageSample s = NvmlProcessUsage.combine(AT, null, "no permission", null, "MIG");
        assertThat(s.processes()).isEmpty();
        assertThat(s.utilizationUnmeasured()).hasValue("MIG");
        assertThat(s.memoryUnmeasured()).hasValue("no permission");
        ProcessUsageSample n = NvmlProcessUsage.combine(AT, List.of(new long[]{3, -1, 0, 0}), null, List.of(), null);
        assertThat(n.memoryUnmeasured()).hasValue(NvmlProcessUsage.MEMORY_NOT_AVAILABLE);
        assertThat(n.processes()).containsExactly(new GpuProcessUsage(3, OptionalDouble.of(0), Optional.empty()));
    }

    @Test
    void newestIsTheLargestTimestampUnsigned() {
        assertThat(NvmlProcessUsage.newest(List.of(new long[]{1, 5, 0}, new long[]{1, 9, 0}), 7)).isEqualTo(9);
        assertThat(NvmlProcessUsage.newest(List.of(), 7)).isEqualTo(7);
        assertThat(NvmlProcessUsage.newest(List.of(new long[]{1, -1, 0}), 7)).isEqualTo(-1);
    }
}
