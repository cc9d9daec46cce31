package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuHealth;
import io.gpusched.nvml.internal.NvmlBinding;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A driver whose NVML lacks the running-process, process-utilization and energy symbols: the energy counter is absent
 * (not 0), per-process usage is empty (the backend cannot list processes), every GPU stays healthy. Own JVM (binding
 * per JVM).
 */
@Tag("native")
class NvmlWithoutProcessCallsTest {

    @Test
    void absentSymbolsLeaveTheirFiguresAbsent(@TempDir Path dir) throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        Path lib = FakeNvml.build(dir, "NO_PROCESS_CALLS");
        FakeNvml.Control.bind(lib);
        FakeNvml.Control.fake_nvml_reset();
        NvmlBinding b = NvmlBinding.acquire(Optional.of(lib));
        try {
            assertThat(b.missing()).containsExactlyInAnyOrder(NvmlBinding.Fn.PROCESSES, NvmlBinding.Fn.ENERGY,
                    NvmlBinding.Fn.PROCESS_UTILIZATION);
        } finally {
            NvmlBinding.release();
        }
        NvmlOptions o = NvmlOptions.defaults().withLibrary(lib).withHealthWatch(false, Duration.ofMillis(50),
                Duration.ZERO);
        try (NvmlInventory inv = NvmlInventory.open(o)) {
            assertThat(inv.sample().metrics()).allSatisfy(m -> {
                assertThat(m.energyMillijoules()).isEmpty();
                assertThat(m.powerWatts()).isPresent();
            });
            assertThat(inv.processUsage(inv.devices().get(0))).isEmpty();
            assertThat(inv.processes(inv.devices().get(0))).isEmpty();
            assertThat(inv.devices()).allSatisfy(d -> assertThat(inv.health(d)).isEqualTo(GpuHealth.HEALTHY));
        }
        assertThat(FakeNvml.Control.fake_nvml_initialized()).isZero();
    }
}
