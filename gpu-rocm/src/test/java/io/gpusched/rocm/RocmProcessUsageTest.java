package io.gpusched.rocm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.rocm.internal.RocmSmiReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Accounting figures of AMD GPUs through the fake librocm_smi64 compiled from the real rocm_smi.h and KFD fixture
 * trees: the energy accumulator times its resolution (absent where the GPU has none), processes and their VRAM from the
 * KFD's per-process files (exact per GPU) or from ROCm SMI's list (a process's VRAM summed over its GPUs: charged only
 * where it uses one), per-process utilization said to be not measured.
 */
@Tag("native")
class RocmProcessUsageTest {
    @TempDir
    static Path dir;
    static Path lib;
    static final long GIB = 1L << 30;

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
        assertThat(FakeRocmSmi.Control.fake_rsmi_initialized()).isZero();
    }

    private GpuInventory open(Path sys) {
        return new RocmSmiInventoryProvider(Optional.of(lib), sys, sys, true).open(null);
    }

    private static Map<Integer, GpuProcessUsage> byPid(ProcessUsageSample s) {
        return s.processes().stream().collect(Collectors.toMap(GpuProcessUsage::pid, p -> p));
    }

    @Test
    void processInfoLayoutMatchesTheRealHeader() {
        assertThat(FakeRocmSmi.Control.fake_rsmi_layout(0)).isEqualTo(RocmSmiReader.PROCESS_INFO_SIZE);
        assertThat(FakeRocmSmi.Control.fake_rsmi_layout(1)).isZero();
        assertThat(FakeRocmSmi.Control.fake_rsmi_layout(2)).isEqualTo(8);
    }

    @Test
    void energyCounterTimesItsResolutionAndAbsentWhereTheGpuHasNone(@TempDir Path sys) {
        FakeRocmSmi.Control.fake_rsmi_set_energy(1, 2_000_000L);
        FakeRocmSmi.Control.fake_rsmi_set_energy(2, -1);
        try (GpuInventory inv = open(sys)) {
            long expected = (long) Math.floor(2_000_000L * (double) 15.3f / 1000);
            assertThat(inv.sample().forDevice(1).orElseThrow().energyMillijoules()).hasValue(expected);
            FakeRocmSmi.Control.fake_rsmi_set_energy(1, 3_000_000L);
            assertThat(inv.sample().forDevice(1).orElseThrow().energyMillijoules())
                    .hasValue((long) Math.floor(3_000_000L * (double) 15.3f / 1000));
            assertThat(inv.sample().forDevice(2).orElseThrow().energyMillijoules()).as("absent, not 0").isEmpty();
            assertThat(inv.sample().forDevice(2).orElseThrow().powerWatts()).isPresent();
        }
    }

    @Test
    void smiProcessListChargesVramOnlyWhereAProcessUsesOneGpu(@TempDir Path sys) {
        FakeRocmSmi.Control.fake_rsmi_add_process(500, 3 * GIB, 1, new int[]{1});
        FakeRocmSmi.Control.fake_rsmi_add_process(600, 8 * GIB, 2, new int[]{1, 2});
        try (GpuInventory inv = open(sys)) {
            ProcessUsageSample one = inv.processUsage(inv.devices().get(1)).orElseThrow();
            assertThat(one.utilizationUnmeasured()).hasValue(KfdProcesses.UTILIZATION_NOT_MEASURED);
            assertThat(one.memoryUnmeasured()).isEmpty();
            assertThat(byPid(one)).containsOnlyKeys(500, 600);
            assertThat(byPid(one).get(500)).isEqualTo(new GpuProcessUsage(500, OptionalDouble.empty(),
                    Optional.of(MemorySize.ofBytes(3 * GIB))));
            assertThat(byPid(one).get(600).memoryUsed()).as("8 GiB over two GPUs: not split by a guess").isEmpty();
            ProcessUsageSample two = inv.processUsage(inv.devices().get(2)).orElseThrow();
            assertThat(two.processes()).extracting(GpuProcessUsage::pid).containsExactly(600);
            assertThat(two.memoryUnmeasured()).hasValueSatisfying(r -> assertThat(r).contains("summed"));
            assertThat(inv.processUsage(inv.devices().get(0)).orElseThrow().processes()).isEmpty();
        }
    }

    @Test
    void kfdPerProcessFilesGiveExactVramPerGpu(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        FakeRocmSmi.Control.fake_rsmi_add_process(700, 99 * GIB, 1, new int[]{0});
        try (GpuInventory inv = open(sys)) {
            GpuDevice d0 = inv.devices().get(0);
            GpuDevice d1 = inv.devices().get(1);
            long id0 = 1000 + Long.parseLong(d0.properties().get("kfd.node"));
            long id1 = 1000 + Long.parseLong(d1.properties().get("kfd.node"));
            Path proc = Files.createDirectories(sys.resolve("class/kfd/kfd/proc"));
            Path p700 = Files.createDirectories(proc.resolve("700"));
            Files.writeString(p700.resolve("vram_" + id0), "4294967296\n");
            Files.writeString(p700.resolve("vram_" + id1), "1073741824\n");
            Files.writeString(p700.resolve("sdma_" + id0), "0\n");
            Path p701 = Files.createDirectories(proc.resolve("701"));
            Files.writeString(p701.resolve("vram_" + id1), "0\n");
            ProcessUsageSample s0 = inv.processUsage(d0).orElseThrow();
            assertThat(s0.processes()).as("the KFD's figure, not ROCm SMI's summed 99 GiB").containsExactly(
                    new GpuProcessUsage(700, OptionalDouble.empty(), Optional.of(MemorySize.ofBytes(4 * GIB))));
            assertThat(s0.utilizationUnmeasured()).hasValue(KfdProcesses.UTILIZATION_NOT_MEASURED);
            ProcessUsageSample s1 = inv.processUsage(d1).orElseThrow();
            assertThat(byPid(s1)).containsOnlyKeys(700, 701);
            assertThat(byPid(s1).get(701).memoryUsed()).hasValue(MemorySize.ofBytes(0));

            KfdSysfsInventory sysfs = KfdSysfsInventory.open(sys, Clock.systemUTC());
            GpuDevice k0 = sysfs.devices().stream().filter(d -> d.uuid().equals(d0.uuid())).findFirst()
                    .orElseThrow();
            assertThat(sysfs.processUsage(k0).orElseThrow().processes()).isEqualTo(s0.processes());
        }
    }

    @Test
    void hostileEntriesInTheKfdProcTreeAreSkipped(@TempDir Path sys) throws Exception {
        KfdFixtures.mi210(sys);
        KfdSysfsInventory inv = KfdSysfsInventory.open(sys, Clock.systemUTC());
        GpuDevice d = inv.devices().get(0);
        long id = 1000 + Long.parseLong(d.properties().get("kfd.node"));
        assertThat(inv.processUsage(d)).as("no KFD proc directory: processes cannot be listed").isEmpty();
        Path proc = Files.createDirectories(sys.resolve("class/kfd/kfd/proc"));
        Files.createDirectories(proc.resolve("notapid"));
        Files.writeString(proc.resolve("notapid").resolve("vram_" + id), "5\n");
        Files.createDirectories(proc.resolve("99999999999"));
        Files.writeString(proc.resolve("99999999999").resolve("vram_" + id), "5\n");
        Files.createDirectories(proc.resolve("10"));
        Files.createSymbolicLink(proc.resolve("10").resolve("vram_" + id), Path.of("/dev/zero"));
        Files.createDirectories(proc.resolve("11"));
        new ProcessBuilder("mkfifo", proc.resolve("11").resolve("vram_" + id).toString()).start().waitFor();
        Files.createDirectories(proc.resolve("12"));
        Files.writeString(proc.resolve("12").resolve("vram_" + id), "-5\n");
        Files.createDirectories(proc.resolve("13"));
        Files.writeString(proc.resolve("13").resolve("vram_" + id), "99999999999999999999999\n");
        Files.createDirectories(proc.resolve("14"));
        Files.writeString(proc.resolve("14").resolve("vram_" + id), "2048\n");
        assertThat(inv.processUsage(d).orElseThrow().processes()).containsExactly(new GpuProcessUsage(14,
                OptionalDouble.empty(), Optional.of(MemorySize.ofBytes(2048))));
    }
}
