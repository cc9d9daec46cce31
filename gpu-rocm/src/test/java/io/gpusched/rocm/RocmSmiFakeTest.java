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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The ROCm SMI binding against a fake librocm_smi64 compiled from the real rocm_smi.h. */
@Tag("native")
class RocmSmiFakeTest {
    @TempDir
    static Path dir;
    static Path lib;

    @BeforeAll
    static void build() throws Exception {
        assumeTrue(FakeRocmSmi.unavailableReason().isEmpty(),
                () -> "skipped: " + FakeRocmSmi.unavailableReason().get());
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
    void aKfdTreeTheLibraryAbortsOnNeverReachesRsmiInit(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        KfdSysfsInventoryTest.deleteTree(KfdFixtures.nodes(sys).resolve("3/io_links"));
        assertThat(new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).contains("KFD node 3 has no io_links").contains("SIGABRT"));
        assertThat(FakeRocmSmi.Control.fake_rsmi_init_calls()).isZero();
        assertThat(new KfdSysfsInventoryProvider(sys).isAvailable()).as("the sysfs provider still serves").isTrue();
    }

    @Test
    void noGpuFromRocmSmiMeansUnavailableEvenWithAKfdTree(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        FakeRocmSmi.Control.fake_rsmi_set_devices(0, new long[0]);
        assertThat(new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).startsWith("ROCm SMI reports no GPU")
                        .contains("KFD topology lists 8 GPU node(s)"));
        FakeRocmSmi.Control.fake_rsmi_set_devices(0, new long[0]);
        assertThat(new RocmSmiInventoryProvider(Optional.of(lib), sys.resolve("none"), sys, true).unavailabilityCause())
                .contains("ROCm SMI reports no GPU (rsmi_num_monitor_devices = 0)");
    }

    /** CPX partitions: ROCm 6 puts the partition in BDF bits 31:28, older releases in the function bits like KFD. */
    @ParameterizedTest
    @ValueSource(ints = {28, 0})
    void everyPartitionJoinsItsOwnRocmSmiDevice(int partitionShift, @TempDir Path sys) throws Exception {
        KfdFixtures.cpx(sys);
        long[] bus = {0x0A, 0x8A};
        long[] ids = new long[8];
        int[] smiOf = new int[8];
        // SMI order: reversed, so index equality cannot pass by accident
        for (int g = 0; g < 2; g++) {
            for (int p = 0; p < 4; p++) {
                int kfdOrder = g * 4 + p;
                int smi = 7 - kfdOrder;
                ids[smi] = (bus[g] << 8) | ((long) p << partitionShift);
                smiOf[kfdOrder] = smi;
            }
        }
        FakeRocmSmi.Control.fake_rsmi_set_devices(8, ids);
        try (GpuInventory inv = new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).open(null)) {
            assertThat(inv.devices()).hasSize(8);
            for (GpuDevice d : inv.devices()) {
                long loc = Long.parseLong(d.properties().get("location_id"));
                int kfdOrder = (((loc >> 8) == 0x8A) ? 4 : 0) + (int) (loc & 7);
                assertThat(d.properties()).as("partition %d of bus %x", loc & 7, loc >> 8)
                        .containsEntry("rsmi.index", String.valueOf(smiOf[kfdOrder]));
                // the fake's busy % is 25 x its own index: the sample comes from the joined device
                assertThat(inv.sample().forDevice(d.index()).orElseThrow().utilizationPercent())
                        .hasValue(25.0 * smiOf[kfdOrder]);
            }
        }
    }

    @Test
    void aLibraryThatKillsItsProcessIsCaughtInTheChildProbe(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        Path copy = Files.createDirectories(dir.resolve("aborting")).resolve("librocm_smi64.so.1");
        Files.copy(lib, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.writeString(Path.of(copy + ".abort"), "");
        RocmSmiProbe.forget();
        RocmSmiInventoryProvider p = new RocmSmiInventoryProvider(Optional.of(copy), sys, sys, true,
                new RocmSmiInventory.Guard(true, true));
        assertThat(p.unavailabilityCause()).hasValueSatisfying(c -> assertThat(c)
                .contains("ROCm SMI killed its probe process (exit 134 = SIGABRT)").contains("Assertion")
                .contains("not called in this process").doesNotContain("\n"));
        assertThat(FakeRocmSmi.Control.fake_rsmi_init_calls()).as("never in this process").isZero();
        Files.delete(Path.of(copy + ".abort"));
        assertThat(p.unavailabilityCause()).as("verdict cached for the same tree and library").isPresent();
        RocmSmiProbe.forget();
        RocmSmiInventoryProvider healthy = new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true,
                new RocmSmiInventory.Guard(true, true));
        assertThat(healthy.unavailabilityCause()).as("the probe passes a library that survives").isEmpty();
        assertThat(RocmSmiProbe.needed(sys)).as("a KFD tree: probe").isTrue();
        assertThat(RocmSmiProbe.needed(sys.resolve("nothing"))).as("no KFD, no DRM: nothing to trip on").isFalse();
        Path card = Files.createDirectories(sys.resolve("drm-only/class/drm/card0/device"));
        Files.writeString(card.resolve("vendor"), "0x10de\n");
        assertThat(RocmSmiProbe.needed(sys.resolve("drm-only"))).as("an NVIDIA card only").isFalse();
        Files.writeString(card.resolve("vendor"), "0x1002\n");
        assertThat(RocmSmiProbe.needed(sys.resolve("drm-only"))).as("an AMD card without KFD").isTrue();
    }
}
