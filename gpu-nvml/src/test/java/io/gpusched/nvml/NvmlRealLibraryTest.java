package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The real libnvidia-ml.so.1 (Debian libnvidia-ml1). Without a driver it must answer NVML 9 and detection moves on. */
@Tag("native")
class NvmlRealLibraryTest {
    static final List<Path> CANDIDATES = List.of(Path.of("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
            Path.of("/usr/lib64/libnvidia-ml.so.1"), Path.of("/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1"));

    /** Present only while the NVIDIA kernel module is loaded. */
    static final Path DRIVER = Path.of("/proc/driver/nvidia/version");

    static Path realLibrary() {
        return CANDIDATES.stream().filter(Files::exists).findFirst().orElse(null);
    }

    @Test
    void withoutADriverTheProviderSaysSoAndDetectionMovesOn() {
        Path lib = realLibrary();
        assumeTrue(lib != null, "skipped: the real libnvidia-ml.so.1 is absent (install Debian's libnvidia-ml1)");
        assumeTrue(!Files.exists(DRIVER), "skipped: an NVIDIA driver is loaded on this host");
        NvmlInventoryProvider p = new NvmlInventoryProvider();
        assertThat(p.unavailabilityCause()).contains("driver not loaded (NVML 9: NVIDIA driver is not loaded)");
        assertThat(new NvmlInventoryProvider(NvmlOptions.defaults().withLibrary(lib)).unavailabilityCause())
                .contains("driver not loaded (NVML 9: NVIDIA driver is not loaded)");
        assertThatThrownBy(GpuInventories::detect).isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("nvml: driver not loaded (NVML 9");
    }

    @Test
    void withADriverTheRealNodeIsRead() {
        Path lib = realLibrary();
        assumeTrue(lib != null && Files.exists(DRIVER),
                "skipped: needs an NVIDIA driver (runs on GPU machines only)");
        try (GpuInventory inv = GpuInventories.detect()) {
            assertThat(inv.backend()).isEqualTo("nvml");
            assertThat(inv.devices()).isNotEmpty();
            assertThat(inv.sample().metrics()).hasSize(inv.devices().size());
        }
    }

    @Test
    void aMissingLibraryIsNamed() {
        NvmlInventoryProvider p = new NvmlInventoryProvider(
                NvmlOptions.defaults().withLibrary(Path.of("/nonexistent/libnvidia-ml.so.1")));
        assertThat(p.unavailabilityCause()).hasValueSatisfying(c -> assertThat(c).startsWith("library not found"));
    }
}
