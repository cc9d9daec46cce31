package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class GpuInventoriesTest {

    @AfterEach
    void reset() {
        FakeProviders.reset();
    }

    @Test
    void detectOpensTheBestAvailableProvider() {
        try (GpuInventory inv = GpuInventories.detect()) {
            assertThat(inv.backend()).isEqualTo("simulated:pcie-4xa10");
        }
        FakeProviders.highCause = null;
        try (GpuInventory inv = GpuInventories.detect()) {
            assertThat(inv.backend()).isEqualTo("simulated:dgx-h100");
        }
    }

    @Test
    void noneAvailableListsEveryCause() {
        FakeProviders.lowCause = "driver not loaded (NVML 9)";
        assertThatThrownBy(GpuInventories::detect)
                .isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("fake-high: library not found")
                .hasMessageContaining("fake-low: driver not loaded (NVML 9)")
                .satisfies(e -> assertThat(((BackendUnavailableException) e).causes()).hasSize(2));
    }

    @Test
    void aProviderThatFailsToOpenIsSkippedWithItsCause() {
        FakeProviders.lowFailsToOpen = true;
        assertThatThrownBy(GpuInventories::detect)
                .hasMessageContaining("fake-low: failed to open: permission denied on /dev/nvidiactl");
    }

    @Test
    void configuredBackendsAreTriedInOrder() {
        FakeProviders.highCause = null;
        GpuConfig onlyLow = GpuConfig.builder().backends(List.of("fake-low")).build();
        assertThat(GpuInventories.detect(onlyLow).backend()).isEqualTo("simulated:pcie-4xa10");
        GpuConfig sim = GpuConfig.builder().backends(List.of("nope", "simulated:mi210-8x")).build();
        assertThat(GpuInventories.detect(sim).backend()).isEqualTo("simulated:mi210-8x");
        GpuConfig missing = GpuConfig.builder().backends(List.of("nvml")).build();
        assertThatThrownBy(() -> GpuInventories.detect(missing))
                .hasMessageContaining("nvml: no such provider on the class path");
    }

    @Test
    void providersReportsAvailabilityByPriority() {
        List<GpuInventories.ProviderStatus> s = GpuInventories.providers();
        assertThat(s).extracting(GpuInventories.ProviderStatus::name).containsExactly("fake-high", "fake-low");
        assertThat(s.get(0).available()).isFalse();
        assertThat(s.get(0).cause()).contains("library not found");
        assertThat(s.get(1).available()).isTrue();
    }
}
