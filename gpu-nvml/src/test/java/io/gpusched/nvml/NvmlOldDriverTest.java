package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.MemorySize;
import io.gpusched.nvml.internal.NvmlBinding;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A driver without the newer symbols: those fields are absent, the backend still works. Own JVM (binding per JVM). */
@Tag("native")
class NvmlOldDriverTest {

    @Test
    void missingSymbolsOnlyDisableTheirFields(@TempDir Path dir) throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        Path lib = FakeNvml.build(dir, true);
        FakeNvml.Control.bind(lib);
        FakeNvml.Control.fake_nvml_reset();
        NvmlBinding b = NvmlBinding.acquire(Optional.of(lib));
        try {
            assertThat(b.missing()).containsExactlyInAnyOrder(NvmlBinding.Fn.MEMORY_V2,
                    NvmlBinding.Fn.NVLINK_REMOTE_TYPE);
        } finally {
            NvmlBinding.release();
        }
        NvmlOptions o = NvmlOptions.defaults().withLibrary(lib).withHealthWatch(false, Duration.ofMillis(50),
                Duration.ZERO);
        try (NvmlInventory inv = NvmlInventory.open(o)) {
            assertThat(inv.devices()).hasSize(8);
            assertThat(inv.devices().get(0).memory()).isEqualTo(MemorySize.ofGibibytes(32));
            assertThat(inv.sample().forDevice(0).orElseThrow().memoryUsed()).contains(MemorySize.ofGibibytes(1));
            assertThat(inv.topology().linkCount(0, 3)).isEqualTo(2);
        }
        FakeNvml.Control.fake_nvml_set_scenario(FakeNvml.HGX);
        try (NvmlInventory inv = NvmlInventory.open(o)) {
            assertThat(inv.topology().links()).as("switch links cannot be told apart without the remote-type call")
                    .allSatisfy(l -> assertThat(l.linkCount()).isZero());
        }
    }
}
