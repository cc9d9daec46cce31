package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NvidiaSmiXmlTest {

    static String fixture(String name) throws IOException {
        try (InputStream in = NvidiaSmiXmlTest.class.getResourceAsStream("/fixtures/" + name)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    @Test
    void v11WithNaValues() throws Exception {
        NvidiaSmiXml.Report r = NvidiaSmiXml.parse(fixture("smi-v11-two-v100s.xml"));
        assertThat(r.driverVersion()).contains("460.73.01");
        assertThat(r.cudaVersion()).contains("11.2");
        assertThat(r.gpus()).hasSize(2);
        NvidiaSmiXml.Gpu a = r.gpus().get(0);
        assertThat(a.pciBusId()).isEqualTo("00000000:00:0D.0");
        assertThat(a.memoryTotalMib()).hasValue(32510);
        assertThat(a.utilization()).hasValue(97);
        assertThat(a.powerWatts()).hasValue(232.8);
        NvidiaSmiXml.Gpu b = r.gpus().get(1);
        assertThat(b.memoryUsedMib()).isEmpty();
        assertThat(b.utilization()).isEmpty();
        assertThat(b.powerWatts()).isEmpty();
    }

    @Test
    void v12MigWithAttachedGpusThatDisagree() throws Exception {
        NvidiaSmiXml.Report r = NvidiaSmiXml.parse(fixture("smi-v12-a100-mig-trimmed.xml"));
        assertThat(r.attachedGpus()).hasValue(4);
        assertThat(r.gpus()).hasSize(1);
        List<GpuDevice> d = NvidiaSmiInventoryProvider.devices(r);
        assertThat(d).hasSize(2).allSatisfy(x -> {
            assertThat(x.parentUuid()).contains("GPU-0b000000-0000-4000-8000-000000000001");
            assertThat(x.memory()).isEqualTo(MemorySize.ofMebibytes(19968));
            assertThat(x.minor()).hasValue(1);
        });
        assertThat(d.get(0).index()).isEqualTo(1);
        assertThat(d.get(0).uuid()).isEqualTo("MIG-GPU-0b000000-0000-4000-8000-000000000001/3/0");
    }

    @Test
    void v13MinorDiffersFromIndexAndPowerMovedElement() throws Exception {
        NvidiaSmiXml.Report r = NvidiaSmiXml.parse(fixture("smi-v13-minor-not-index.xml"));
        List<GpuDevice> d = NvidiaSmiInventoryProvider.devices(r);
        assertThat(d.get(0).index()).isZero();
        assertThat(d.get(0).minor()).hasValue(1);
        assertThat(d.get(1).minor()).hasValue(0);
        assertThat(r.gpus().get(0).powerWatts()).hasValue(6.52);
        assertThat(r.gpus().get(1).powerWatts()).isEmpty();
    }

    @Test
    void fourDigitDomainAndMinorNotAvailable() throws Exception {
        NvidiaSmiXml.Report r = NvidiaSmiXml.parse(fixture("smi-v8-windows-minor-na.xml"));
        GpuDevice d = NvidiaSmiInventoryProvider.devices(r).get(0);
        assertThat(d.pciBusId()).isEqualTo("00000000:04:00.0");
        assertThat(d.minor()).isEmpty();
    }

    @Test
    void externalEntitiesAreNeverResolved() throws Exception {
        String xml = fixture("smi-xxe.xml");
        try {
            NvidiaSmiXml.Report r = NvidiaSmiXml.parse(xml);
            assertThat(r.gpus().get(0).name()).doesNotContain("root:");
        } catch (IllegalArgumentException refused) {
            assertThat(refused.getMessage()).contains("not valid XML");
        }
    }

    @Test
    void garbageIsRejectedClearly() {
        assertThatThrownBy(() -> NvidiaSmiXml.parse("NVIDIA-SMI has failed")).hasMessageContaining("not valid XML");
        assertThatThrownBy(() -> NvidiaSmiXml.parse("<other/>")).hasMessageContaining("expected <nvidia_smi_log>");
        assertThatThrownBy(() -> NvidiaSmiXml.parse("<nvidia_smi_log><gpu id=\"0:1:0.0\"/></nvidia_smi_log>"))
                .hasMessageContaining("no uuid");
    }

    /** A fake nvidia-smi: a shell script in a temp dir that prints a fixture, or fails like the real one. */
    static Path script(Path dir, String body) throws IOException {
        Path p = dir.resolve("nvidia-smi");
        Files.writeString(p, "#!/bin/sh\n" + body + "\n");
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        return p;
    }

    @Test
    void providerRunsTheBinaryAndSamplesAgain(@TempDir Path dir) throws Exception {
        Path xml = dir.resolve("out.xml");
        Files.writeString(xml, fixture("smi-v13-minor-not-index.xml"));
        Path bin = script(dir, "[ \"$1 $2\" = \"-q -x\" ] || exit 3\ncat " + xml);
        NvidiaSmiInventoryProvider p = new NvidiaSmiInventoryProvider(Optional.of(bin), Duration.ofSeconds(20));
        assertThat(p.unavailabilityCause()).isEmpty();
        try (GpuInventory inv = p.open(null)) {
            assertThat(inv.backend()).isEqualTo("nvidia-smi");
            assertThat(inv.devices()).hasSize(2);
            GpuMetrics m = inv.sample().forDevice(0).orElseThrow();
            assertThat(m.temperatureCelsius()).hasValue(13);
            assertThat(m.memoryUsed()).contains(MemorySize.ZERO);
        }
    }

    @Test
    void processesOfTheLatestRunGiveMemoryPerProcessNotUtilization(@TempDir Path dir) throws Exception {
        Path xml = dir.resolve("out.xml");
        Files.writeString(xml, fixture("nvidia-smi/datakit_8x-v100s-pcie-32gb_drv460.73.01_v11.xml"));
        Path runs = dir.resolve("runs");
        Path bin = script(dir, "echo run >> " + runs + "\ncat " + xml);
        try (GpuInventory inv = new NvidiaSmiInventoryProvider(Optional.of(bin), Duration.ofSeconds(20)).open(null)) {
            inv.sample();
            long before = Files.readAllLines(runs).size();
            ProcessUsageSample s = inv.processUsage(inv.devices().get(0)).orElseThrow();
            assertThat(Files.readAllLines(runs)).as("the sample's run is reused, nvidia-smi not run again")
                    .hasSize((int) before);
            assertThat(s.processes()).containsExactly(new GpuProcessUsage(37305, OptionalDouble.empty(),
                    Optional.of(MemorySize.ofMebibytes(31683))));
            assertThat(s.utilizationUnmeasured()).hasValue(NvidiaSmiInventoryProvider.NO_PROCESS_UTILIZATION);
            assertThat(s.memoryUnmeasured()).isEmpty();
        }
    }

    @Test
    void migProcessesGoToTheirGpuAndComputeInstance(@TempDir Path dir) throws Exception {
        String processes = "<processes><process_info><gpu_instance_id>3</gpu_instance_id>"
                + "<compute_instance_id>0</compute_instance_id><pid>4100</pid><type>C</type>"
                + "<process_name>python</process_name><used_memory>5120 MiB</used_memory></process_info>"
                + "<process_info><gpu_instance_id>4</gpu_instance_id><compute_instance_id>0</compute_instance_id>"
                + "<pid>4200</pid><type>C</type><used_memory>N/A</used_memory></process_info>"
                + "<process_info><pid>0</pid><used_memory>1 MiB</used_memory></process_info>"
                + "<process_info><pid>99999999999</pid></process_info></processes></gpu>";
        Path xml = dir.resolve("out.xml");
        Files.writeString(xml, fixture("smi-v12-a100-mig-trimmed.xml").replace("</gpu>", processes));
        Path bin = script(dir, "cat " + xml);
        try (GpuInventory inv = new NvidiaSmiInventoryProvider(Optional.of(bin), Duration.ofSeconds(20)).open(null)) {
            GpuDevice gi3 = inv.devices().get(0);
            GpuDevice gi4 = inv.devices().get(1);
            assertThat(inv.processUsage(gi3).orElseThrow().processes()).as("a run of its own: no sample yet")
                    .containsExactly(new GpuProcessUsage(4100, OptionalDouble.empty(),
                            Optional.of(MemorySize.ofMebibytes(5120))));
            assertThat(inv.processUsage(gi4).orElseThrow().processes()).containsExactly(new GpuProcessUsage(4200,
                    OptionalDouble.empty(), Optional.empty()));
        }
        assertThat(NvidiaSmiXml.parse(Files.readString(xml)).gpus().get(0).processes()).extracting(
                NvidiaSmiXml.Process::pid).as("pids 0 and past 9 digits are left out").containsExactly(4100, 4200);
    }

    @Test
    void exitCodesAndTimeoutsAreCauses(@TempDir Path dir) throws Exception {
        Path bin =
                script(dir, "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\n"
                        + "exit 9");
        assertThat(new NvidiaSmiInventoryProvider(Optional.of(bin), Duration.ofSeconds(20)).unavailabilityCause())
                .contains("nvidia-smi driver not loaded (exit 9: NVIDIA-SMI has failed because it couldn't"
                        + " communicate with the NVIDIA driver.)");
        Path slow = script(Files.createDirectories(dir.resolve("slow")), "sleep 30");
        assertThat(new NvidiaSmiInventoryProvider(Optional.of(slow), Duration.ofMillis(300)).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).contains("did not answer within 300 ms"));
        assertThat(new NvidiaSmiInventoryProvider(Optional.empty(), Duration.ofSeconds(1)).unavailabilityCause())
                .contains("nvidia-smi not found on the PATH");
    }

    @Test
    void theRealNvidiaSmiWithoutADriverExitsNine() {
        Path real = Path.of("/usr/bin/nvidia-smi");
        assumeTrue(Files.isExecutable(real), "skipped: Debian's nvidia-smi is not installed");
        assumeTrue(!Files.exists(NvmlRealLibraryTest.DRIVER), "skipped: an NVIDIA driver is loaded");
        assertThat(new NvidiaSmiInventoryProvider(Optional.of(real), Duration.ofSeconds(30)).unavailabilityCause())
                .hasValueSatisfying(c -> assertThat(c).startsWith("nvidia-smi driver not loaded (exit 9"));
    }

    @Test
    void capturedOutputsParse() throws Exception {
        // real captures, copied into src/test/resources/fixtures/nvidia-smi (its INDEX.txt names their sources)
        NvidiaSmiXml.Report v100 = NvidiaSmiXml.parse(
                fixture("nvidia-smi/datakit_8x-v100s-pcie-32gb_drv460.73.01_v11.xml"));
        assertThat(v100.gpus()).hasSize(8);
        assertThat(NvidiaSmiInventoryProvider.devices(v100)).extracting(d -> d.minor().getAsInt())
                .containsExactly(0, 1, 2, 3, 4, 5, 6, 7);
        NvidiaSmiXml.Report a100 = NvidiaSmiXml.parse(
                fixture("nvidia-smi/telegraf_a100-sxm4-80gb-MIG_drv535.54.03_v12.xml"));
        assertThat(a100.attachedGpus()).hasValue(4);
        assertThat(NvidiaSmiInventoryProvider.devices(a100)).hasSize(4)
                .allSatisfy(d -> assertThat(d.memory()).isEqualTo(MemorySize.ofMebibytes(19968)));
        NvidiaSmiXml.Report a5000 = NvidiaSmiXml.parse(
                fixture("nvidia-smi/telegraf_dual-rtx-a5000_drv590.44.01_v13.xml"));
        assertThat(NvidiaSmiInventoryProvider.devices(a5000)).extracting(d -> d.minor().getAsInt())
                .containsExactly(1, 0);
        NvidiaSmiXml.Report win = NvidiaSmiXml.parse(
                fixture("nvidia-smi/telegraf_rtx-3080-windows-minorNA_drv536.40_v12.xml"));
        assertThat(NvidiaSmiInventoryProvider.devices(win).get(0).minor()).isEmpty();
    }
}
