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
import org.junit.jupiter.api.io.TempDir;

/**
 * The real librocm-smi64-1 (5.2.3): without amdgpu, rsmi_init answers 8 and detection moves on; on KFD trees it
 * aborts on, in child JVMs that see the tree at /sys/class/kfd ({@link KfdNamespace}), the host process survives and
 * the provider says why it is unavailable.
 */
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
        assertThat(new RocmSmiInventoryProvider().unavailabilityCause())
                .as("by default, quiet on a host without amdgpu")
                .hasValueSatisfying(c -> assertThat(c).contains("rsmi_init not called"));
        assertThatThrownBy(GpuInventories::detect).isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("rocm-smi: amdgpu is not loaded")
                .hasMessageContaining("amd-sysfs: no KFD topology");
    }

    static Path mi308(Path tmp) throws Exception {
        Path shared = KfdSysfsInventoryTest.captures().resolve("topology-parsing-mi308/topology");
        return KfdNamespace.copy(shared, tmp.resolve("mi308"));
    }

    @Test
    void aNodeWithoutIoLinksKillsTheBareLibraryButNotTheProvider(@TempDir Path tmp) throws Exception {
        assumeTrue(KfdNamespace.unavailableReason().isEmpty(),
                () -> "skipped: " + KfdNamespace.unavailableReason().get());
        Path tree = mi308(tmp);
        KfdChild.deleteTree(tree.resolve("nodes/5/io_links"));
        String main = KfdChild.class.getName();

        KfdNamespace.Result bare = KfdNamespace.run(tree, KfdNamespace.java(main, "provider", "false", "false"), 120);
        assertThat(bare.exit()).as("no guard at all: the library kills the JVM; %s", bare.stderr()).isEqualTo(134);
        assertThat(bare.stderr()).contains("Assertion `io_link_dir != nullptr' failed");

        KfdNamespace.Result guarded = KfdNamespace.run(tree, KfdNamespace.java(main, "provider", "true", "true"), 120);
        assertThat(guarded.exit()).as(guarded.stderr()).isZero();
        assertThat(guarded.stdout()).contains("cause: KFD node 5 has no io_links directory").contains("SIGABRT");

        KfdNamespace.Result probeOnly =
                KfdNamespace.run(tree, KfdNamespace.java(main, "provider", "false", "true"), 180);
        assertThat(probeOnly.exit()).as("the child probe alone saves the host; %s", probeOnly.stderr()).isZero();
        assertThat(probeOnly.stdout()).contains("cause: ROCm SMI killed its probe process (exit 134 = SIGABRT)")
                .contains("Assertion `io_link_dir != nullptr' failed").contains("not called in this process");

        KfdNamespace.Result detect = KfdNamespace.run(tree, KfdNamespace.java(main, "detect"), 180);
        assertThat(detect.exit()).as(detect.stderr()).isZero();
        assertThat(detect.stdout()).as("the pure-Java backend serves the same tree").contains("detected: amd-sysfs 32");
    }

    @Test
    void theRealLibraryReportingNoGpuMakesTheProviderUnavailable(@TempDir Path tmp) throws Exception {
        assumeTrue(KfdNamespace.unavailableReason().isEmpty(),
                () -> "skipped: " + KfdNamespace.unavailableReason().get());
        KfdNamespace.Result r = KfdNamespace.run(mi308(tmp),
                KfdNamespace.java(KfdChild.class.getName(), "provider", "true", "true"), 180);
        assertThat(r.exit()).as(r.stderr()).isZero();
        assertThat(r.stdout()).as("no DRM card in the namespace: ROCm SMI counts 0 devices over 32 KFD GPU nodes")
                .contains(
                        "cause: ROCm SMI reports no GPU (rsmi_num_monitor_devices = 0) although the KFD topology lists"
                                + " 32 GPU node(s)");
    }
}
