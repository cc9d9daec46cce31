package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * WSL2 on a fake host tree ({@code dev/dxg}, {@code usr/lib/wsl/lib}) with the fake NVML standing in for the Windows
 * driver's {@code libnvidia-ml.so.1}: detected, NVML opened from the WSL library directory, and what cannot work said
 * in the cause (NVML missing) or by {@link Wsl2#limitations()} (NVML working).
 */
class Wsl2Test {
    @TempDir
    Path root;

    @Test
    void notWslWithoutDxgOrTheLibraryDir() throws Exception {
        assertThat(Wsl2.detect(root)).isEmpty();
        Files.createDirectories(root.resolve("dev"));
        Files.writeString(root.resolve("dev/null"), "");
        assertThat(Wsl2.detect(root)).isEmpty();
        assertThat(new NvmlInventoryProvider(NvmlOptions.defaults(), root).wsl2()).isEmpty();
    }

    @Test
    void wslWithoutNvmlSaysWhatCannotWork() throws Exception {
        Files.createDirectories(root.resolve("dev"));
        Files.writeString(root.resolve("dev/dxg"), "");
        Files.createDirectories(root.resolve("usr/lib/wsl/lib"));
        Wsl2 w = Wsl2.detect(root).orElseThrow();
        assertThat(w.nvml()).isEmpty();
        assumeTrue(System.getProperty("gpusched.nvml.library") == null, "an NVML library is forced by property");
        NvmlInventoryProvider p = new NvmlInventoryProvider(NvmlOptions.defaults(), root);
        assertThat(p.options().library()).as("no WSL NVML: the default search").isEmpty();
        String cause = p.unavailabilityCause().orElse("");
        if (!cause.isEmpty()) { // on a host with a real NVML the probe may still work
            assertThat(cause).contains("WSL2 (" + root.resolve("dev/dxg"))
                    .contains("libnvidia-ml.so.1, which is absent")
                    .contains("no per-GPU device node").contains("nvmlDeviceGetMinorNumber");
        }
    }

    @Tag("native")
    @Test
    void wslOpensNvmlFromTheWslLibraryDirectory() throws Exception {
        assumeTrue(FakeNvml.unavailableReason().isEmpty(), () -> "skipped: " + FakeNvml.unavailableReason().get());
        Path lib = FakeNvml.build(Files.createDirectories(root.resolve("build")), false);
        FakeNvml.Control.bind(lib);
        FakeNvml.Control.fake_nvml_reset();
        Path dir = Files.createDirectories(root.resolve("usr/lib/wsl/lib"));
        Files.writeString(dir.resolve("libdxcore.so"), "");
        Files.createSymbolicLink(dir.resolve("libnvidia-ml.so.1"), lib);
        NvmlInventoryProvider p = new NvmlInventoryProvider(NvmlOptions.defaults().withSysfsRoot(root.resolve("sys"))
                .withHealthWatch(false, java.time.Duration.ofMillis(50), java.time.Duration.ofMinutes(5)), root);
        assertThat(p.wsl2()).isPresent();
        assertThat(p.options().library()).contains(dir.resolve("libnvidia-ml.so.1"));
        assertThat(p.unavailabilityCause()).isEmpty();
        try (GpuInventory inv = p.open(null)) {
            assertThat(inv.devices()).isNotEmpty();
        }
        assertThat(p.wsl2().get().limitations()).hasSize(3).anySatisfy(l -> assertThat(l).contains("/dev/dxg"));
        assertThat(List.of(p.wsl2().get().describe())).allSatisfy(d -> assertThat(d).contains("NVML from " + dir
                .resolve("libnvidia-ml.so.1")));
    }
}
