package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.MemorySize;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The ROCm SMI binding against a fake librocm_smi64 compiled from the real rocm_smi.h. */
@Tag("native")
class RocmSmiFakeTest {
    @TempDir
    static Path dir;
    static Path lib;

    @BeforeAll
    static void build() throws Exception {
        assumeTrue(FakeRocmSmi.unavailableReason().isEmpty(), () -> "skipped: " + FakeRocmSmi.unavailableReason().get());
        lib = FakeRocmSmi.build(dir);
        FakeRocmSmi.Control.bind(lib);
    }

    @BeforeEach
    void reset() {
        FakeRocmSmi.Control.fake_rsmi_reset();
    }

    @AfterEach
    void shutDown() {
        assertThat(FakeRocmSmi.Control.fake_rsmi_initialized()).as("rsmi_shut_down for every rsmi_init").isZero();
    }

    @Test
    void devicesAndMetricsWithoutASysfsTree(@TempDir Path sys) {
        RocmSmiInventoryProvider p = new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true);
        assertThat(p.unavailabilityCause()).isEmpty();
        try (GpuInventory inv = p.open(null)) {
            GpuDevice d = inv.devices().get(1);
            assertThat(inv.devices()).hasSize(4);
            assertThat(d.pciBusId()).isEqualTo("0000:26:00.0");
            assertThat(d.uuid()).isEqualTo("GPU-1000000000000001");
            assertThat(d.memory()).isEqualTo(MemorySize.ofGibibytes(64));
            assertThat(d.name()).isEqualTo("AMD Instinct MI210");
            GpuMetrics m = inv.sample().forDevice(2).orElseThrow();
            assertThat(m.utilizationPercent()).hasValue(50);
            assertThat(m.memoryUsed()).contains(MemorySize.ofGibibytes(3));
            assertThat(m.temperatureCelsius()).hasValue(42);
            assertThat(m.powerWatts()).hasValue(152);
            assertThat(inv.sample().forDevice(3).orElseThrow().temperatureCelsius()).as("junction fallback")
                    .hasValue(70.5);
        }
    }

    @Test
    void staticFactsComeFromKfdJoinedByPciAddress(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        try (GpuInventory inv = new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).open(null)) {
            assertThat(inv.devices()).hasSize(8);
            assertThat(inv.devices().get(0).minor()).hasValue(130);
            assertThat(inv.devices().get(1).properties()).containsEntry("rsmi.index", "1");
            assertThat(inv.topology().linkCount(0, 1)).isEqualTo(1);
            assertThat(inv.sample().forDevice(1).orElseThrow().utilizationPercent()).hasValue(25);
            assertThat(inv.sample().forDevice(5).orElseThrow().utilizationPercent()).as("not known to SMI").isEmpty();
        }
    }

    @Test
    void initFailureIsACause(@TempDir Path sys) {
        FakeRocmSmi.Control.fake_rsmi_set_init_result(8);
        assertThat(new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).startsWith("rsmi_init returned RSMI_STATUS_INIT_ERROR (8)")
                        .contains("amdgpu is not loaded"));
    }

    @Test
    void aMalformedKfdTreeNeverReachesRsmiInit(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        Files.writeString(KfdFixtures.nodes(sys).resolve("3/properties"), "simd_count lots\n");
        assertThat(new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).contains("malformed").contains("would abort the process"));
        assertThat(FakeRocmSmi.Control.fake_rsmi_init_calls()).isZero();
        assertThat(new KfdSysfsInventoryProvider(sys).isAvailable()).as("the sysfs provider still serves").isTrue();
    }
}
