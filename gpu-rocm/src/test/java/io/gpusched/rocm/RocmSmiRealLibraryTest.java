package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuInventories;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The real librocm-smi64-1 (5.2.3): without amdgpu, rsmi_init answers 8 and detection moves on. */
@Tag("native")
class RocmSmiRealLibraryTest {

    @Test
    void withoutAmdgpuTheProviderSaysSo() {
        Path real = Path.of("/usr/lib/librocm_smi64.so.1");
        assumeTrue(Files.exists(real), "skipped: Debian's librocm-smi64-1 is not installed");
        assumeTrue(!Files.exists(Path.of("/sys/class/kfd")), "skipped: this host has a KFD (amdgpu loaded)");
        assertThat(new RocmSmiInventoryProvider(Optional.empty(), Path.of("/sys"), Path.of("/dev"), true)
                .unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).startsWith("rsmi_init returned RSMI_STATUS_INIT_ERROR (8)")
                        .contains("amdgpu is not loaded"));
        assertThat(new RocmSmiInventoryProvider(Optional.of(real), Path.of("/sys"), Path.of("/dev"), true)
                .unavailabilityCause()).hasValueSatisfying(c -> assertThat(c).contains("(8)"));
        assertThat(new RocmSmiInventoryProvider().unavailabilityCause()).as("by default, quiet on a host without amdgpu")
                .hasValueSatisfying(c -> assertThat(c).contains("rsmi_init not called"));
        assertThatThrownBy(GpuInventories::detect).isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("rocm-smi: amdgpu is not loaded")
                .hasMessageContaining("amd-sysfs: no KFD topology");
    }
}
