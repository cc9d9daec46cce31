package io.gpusched.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CudaEnvironmentResolverTest {
    @TempDir
    Path dir;
    Path root;
    Path libs;
    List<CudaInstallation> installations;

    @BeforeEach
    void setUp() throws Exception {
        root = CudaFixtures.host(dir.resolve("host"));
        installations = CudaInstallations.discover(new CudaSearch(root, Map.of(), List.of(), false)).installations();
        libs = dir.resolve("driverlibs");
        CudaFixtures.file(libs.resolve("libcuda.so.580.65.06"), "");
        CudaFixtures.link(libs.resolve("libcuda.so.1"), "libcuda.so.580.65.06");
        CudaFixtures.file(libs.resolve("libnvidia-ml.so.580.65.06"), "");
        CudaFixtures.file(libs.resolve("libnvidia-ml.so.535.0.0"), "");
        CudaFixtures.link(libs.resolve("libnvidia-ml.so.1"), "libnvidia-ml.so.535.0.0");
    }

    CudaEnvironmentResolver resolver(String driver) {
        return CudaEnvironmentResolver.builder().installations(installations).driverLibraryDirs(List.of(libs))
                .driver(DriverVersion.parse(driver), Optional.empty()).build();
    }

    static Allocation allocate(String profile, String... flags) {
        GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated(profile)).auditLogging(false)
                .build();
        return s.allocate(GpuRequests.fromCliFlags(flags));
    }

    @Test
    void exclusiveNvidiaAllocation() throws Exception {
        Allocation a = allocate("dgx1-v100", "--gpu=2");
        CudaEnvironment env = resolver("580.65.06").resolve(a, CudaRequirement.NONE);
        String uuids = String.join(",", a.deviceUuids());
        assertThat(env.variables()).containsEntry("CUDA_VISIBLE_DEVICES", uuids)
                .containsEntry("NVIDIA_VISIBLE_DEVICES", uuids).containsEntry("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
                .doesNotContainKey("ROCR_VISIBLE_DEVICES").doesNotContainKey("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
        CudaInstallation chosen = env.installation().orElseThrow();
        assertThat(chosen.version().orElseThrow().majorMinor()).as("newest compatible with a runtime: 12.4, not the"
                + " headers-only 12.8").isEqualTo(new CudaVersion(12, 4, 0));
        assertThat(env.variables()).containsEntry("CUDA_HOME", chosen.root().toString());
        assertThat(env.compatibility().orElseThrow().verdict()).isEqualTo(Compatibility.Verdict.COMPATIBLE);
        assertThat(env.mounts()).extracting(CudaEnvironment.Mount::source).contains(chosen.root(),
                libs.resolve("libcuda.so.580.65.06"), libs.resolve("libcuda.so.1"),
                libs.resolve("libnvidia-ml.so.580.65.06")).doesNotContain(libs.resolve("libnvidia-ml.so.535.0.0"),
                        libs.resolve("libnvidia-ml.so.1"));
        assertThat(env.mounts()).allSatisfy(m -> assertThat(m.readOnly()).isTrue());
        Map<String, String> job = env.applyTo(Map.of("CUDA_VISIBLE_DEVICES", "0,1,2,3", "NVIDIA_VISIBLE_DEVICES",
                "all", "PATH", "/usr/bin", "HOME", "/home/u"));
        assertThat(job).containsEntry("CUDA_VISIBLE_DEVICES", uuids).containsEntry("NVIDIA_VISIBLE_DEVICES", uuids)
                .containsEntry("HOME", "/home/u");
        JsonNode json = new ObjectMapper().readTree(env.toJson());
        assertThat(json.get("variables").get("CUDA_DEVICE_ORDER").asText()).isEqualTo("PCI_BUS_ID");
        assertThat(json.get("compatibility").get("verdict").asText()).isEqualTo("COMPATIBLE");
    }

    @Test
    void headersOnlyLeftoversAreNeverChosenAndTheNotesSayWhy() throws Exception {
        Allocation a = allocate("dgx1-v100", "--gpu=1");
        CudaEnvironment env = resolver("580.65.06").resolve(a, CudaRequirement.NONE);
        Path home = Path.of(env.variables().get("CUDA_HOME"));
        assertThat(home).isEqualTo(root.resolve("usr/local/cuda-12.4").toRealPath());
        assertThat(env.notes()).anySatisfy(n -> assertThat(n).contains("passed over").contains("cuda-12.8")
                .contains("no CUDA runtime"));
        // independent of the resolver: the library directory handed to the job really holds a libcudart
        List<String> ld = env.pathPrepends().get("LD_LIBRARY_PATH");
        assertThat(ld).isNotEmpty();
        try (var files = java.nio.file.Files.list(Path.of(ld.get(ld.size() - 1)))) {
            assertThat(files.map(f -> f.getFileName().toString())).anyMatch(f -> f.startsWith("libcudart.so."));
        }
        // asking for exactly the headers-only version is refused with the reason, not answered with it
        assertThatThrownBy(() -> resolver("580.65.06").resolve(a, CudaRequirement.parse("12.8")))
                .isInstanceOf(CudaResolutionException.class).hasMessageContaining("cuda-12.8")
                .hasMessageContaining("no CUDA runtime");
        // and whatever the driver, the chosen installation has a runtime
        for (String driver : List.of("418.39", "440.33", "470.82.01", "525.60.13", "550.54.14", "580.65.06")) {
            resolver(driver).resolve(a, CudaRequirement.NONE).installation()
                    .ifPresent(i -> assertThat(i.runtimeLibrary().orElseThrow()).exists());
        }
    }

    @Test
    void anA10GGetsForwardCompatibilityLikeOtherDataCentreGpus() {
        SimulatedGpuInventory inv = SimulatedGpuInventory.builder("g5").device(GpuDevice.builder().index(0)
                .uuid("GPU-a10g").vendor(GpuVendor.NVIDIA).name("NVIDIA A10G").memory(MemorySize.ofGibibytes(24))
                .pciBusId("00000000:00:1e.0").build()).build();
        Allocation a = GpuScheduler.builder().inventory(inv).auditLogging(false).build()
                .allocate(GpuRequest.builder().build());
        CudaEnvironment env = resolver("470.82.01").resolve(a, CudaRequirement.parse("12.4"));
        assertThat(env.compatibility().orElseThrow().verdict()).isEqualTo(Compatibility.Verdict.NEEDS_FORWARD_COMPAT);
    }

    @Test
    void requirementPicksTheNewestThatSatisfiesIt() {
        Allocation a = allocate("dgx1-v100", "--gpu=1");
        CudaEnvironment env = resolver("580.65.06").resolve(a, CudaRequirement.parse("11"));
        assertThat(env.installation().orElseThrow().version().orElseThrow().majorMinor())
                .isEqualTo(new CudaVersion(11, 8, 0));
        assertThat(env.pathPrepends().get("PATH")).containsExactly(
                env.installation().get().root().resolve("bin").toString());
        assertThat(env.applyTo(Map.of("PATH", "/usr/bin")).get("PATH"))
                .isEqualTo(env.installation().get().root().resolve("bin") + ":/usr/bin");
        CudaEnvironment at = resolver("580.65.06").resolve(a,
                CudaRequirement.NONE.preferring(root.resolve("usr/local/cuda")));
        assertThat(at.installation().orElseThrow().version().orElseThrow().majorMinor())
                .isEqualTo(new CudaVersion(12, 4, 0));
        assertThatThrownBy(() -> resolver("580.65.06").resolve(a, CudaRequirement.parse(">=14.0")))
                .isInstanceOf(CudaResolutionException.class)
                .hasMessageContaining("no CUDA installation satisfies CUDA >=14.0")
                .hasMessageContaining("cuda-12.4");
    }

    @Test
    void anOldDriverGetsMinorVersionCompatibilityOrARefusalThatSaysWhy() {
        Allocation a = allocate("dgx1-v100", "--gpu=1");
        CudaEnvironment env = resolver("525.60.13").resolve(a, CudaRequirement.parse(">=12.1"));
        assertThat(env.compatibility().orElseThrow().verdict())
                .isEqualTo(Compatibility.Verdict.COMPATIBLE_MINOR_VERSION);
        assertThat(env.notes()).anySatisfy(n -> assertThat(n).contains("minor version compatibility"));
        assertThatThrownBy(() -> resolver("418.39").resolve(a, CudaRequirement.parse("12")))
                .isInstanceOf(CudaResolutionException.class).hasMessageContaining("runs on this driver")
                .hasMessageContaining("needs driver >=");
        CudaEnvironment none = resolver("418.39").resolve(a, CudaRequirement.NONE);
        assertThat(none.installation()).isEmpty();
        assertThat(none.notes()).anySatisfy(n -> assertThat(n).contains("bring its own CUDA runtime"));
        assertThat(none.variables()).containsKey("CUDA_VISIBLE_DEVICES");
    }

    @Test
    void forwardCompatPutsTheCompatDirFirst() {
        Allocation a = allocate("dgx-h100", "--gpu=1");
        CudaEnvironment env = resolver("470.82.01").resolve(a, CudaRequirement.parse("12.4"));
        CudaInstallation i = env.installation().orElseThrow();
        assertThat(env.compatibility().orElseThrow().verdict()).isEqualTo(Compatibility.Verdict.NEEDS_FORWARD_COMPAT);
        assertThat(env.pathPrepends().get("LD_LIBRARY_PATH")).containsExactly(
                i.root().resolve("compat").toString(), i.libraryDir().orElseThrow().toString());
    }

    @Test
    void sharedAllocationsGetMpsLimits() {
        Allocation a = allocate("dgx1-v100", "--gpu=2", "--shared=4GB");
        CudaEnvironment env = resolver("580.65.06").resolve(a, CudaRequirement.NONE);
        assertThat(env.variables()).containsEntry("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M,1=4096M")
                .containsEntry("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "13");
    }

    @Test
    void migDevicesAreNamedByTheirMigUuid() {
        SimulatedGpuInventory inv = SimulatedGpuInventory.builder("mig").device(GpuDevice.builder().index(1)
                .uuid("MIG-4a1b2c3d-0000-4000-8000-000000000001").vendor(GpuVendor.NVIDIA)
                .name("NVIDIA A100-SXM4-80GB MIG 3g.40gb").memory(MemorySize.ofGibibytes(40))
                .pciBusId("00000000:07:00.0").parentUuid("GPU-4a1b2c3d-0000-4000-8000-000000000000")
                .driverVersion("580.65.06").build()).build();
        Allocation a = GpuScheduler.builder().inventory(inv).auditLogging(false).build()
                .allocate(GpuRequest.builder().build());
        CudaEnvironment env = CudaEnvironmentResolver.builder().installations(installations)
                .driverLibraryDirs(List.of()).deviceNaming(CudaEnvironmentResolver.DeviceNaming.INDICES).build()
                .resolve(a, CudaRequirement.NONE);
        assertThat(env.variables()).containsEntry("CUDA_VISIBLE_DEVICES", "MIG-4a1b2c3d-0000-4000-8000-000000000001");
        assertThat(env.compatibility().orElseThrow().verdict()).as("driver read off the devices")
                .isEqualTo(Compatibility.Verdict.COMPATIBLE);
    }

    @Test
    void indicesWhenAsked() {
        Allocation a = allocate("dgx1-v100", "--devices=3,5");
        CudaEnvironment env = CudaEnvironmentResolver.builder().installations(installations)
                .driverLibraryDirs(List.of()).deviceNaming(CudaEnvironmentResolver.DeviceNaming.INDICES).build()
                .resolve(a, CudaRequirement.NONE);
        assertThat(env.variables()).containsEntry("CUDA_VISIBLE_DEVICES", "3,5");
    }

    @Test
    void amdJobsGetRocrVisibleDevicesOnly() {
        Allocation a = allocate("mi210-8x", "--gpu=2");
        CudaEnvironment env = resolver("580.65.06").resolve(a, CudaRequirement.NONE);
        assertThat(env.variables()).containsOnlyKeys("ROCR_VISIBLE_DEVICES");
        assertThat(env.variables().get("ROCR_VISIBLE_DEVICES")).isEqualTo(
                a.deviceIndices().get(0) + "," + a.deviceIndices().get(1));
        assertThat(env.applyTo(Map.of("CUDA_VISIBLE_DEVICES", "0", "HIP_VISIBLE_DEVICES", "1")))
                .doesNotContainKeys("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES");
        assertThat(env.mounts()).isEmpty();
    }

    @Test
    void noDriverKnownIsSaid(@TempDir Path proc) {
        Allocation a = allocate("pcie-4xa10", "--gpu=1");
        GpuDevice d = a.devices().get(0);
        assertThat(d.driverVersion()).as("the profile's device has a driver").isPresent();
        Allocation noDriver = new Allocation(a.id(), List.of(d.toBuilder().driverVersion(null).build()), a.request(),
                a.createdAt());
        assertThat(noDriver.devices().get(0).driverVersion()).isEmpty();
        CudaEnvironmentResolver r = CudaEnvironmentResolver.builder().installations(installations)
                .procRoot(proc).driverLibraryDirs(List.of()).build();
        assertThat(r.driverFor(a)).isPresent();
        assertThat(r.driverFor(noDriver)).as("no device driver and an empty /proc").isEmpty();
        CudaEnvironment driverless = r.resolve(noDriver, CudaRequirement.NONE);
        assertThat(driverless.notes()).anySatisfy(n -> assertThat(n).contains("no NVIDIA driver version is known"));
        assertThat(driverless.compatibility().orElseThrow().verdict()).isEqualTo(Compatibility.Verdict.UNKNOWN);
        assertThat(driverless.mounts()).noneMatch(m -> m.source().getFileName().toString().startsWith("libcuda"));
        SimulatedGpuInventory bare = SimulatedGpuInventory.builder("bare").device(GpuDevice.builder().index(0)
                .uuid("GPU-1").vendor(GpuVendor.NVIDIA).name("NVIDIA A10").memory(MemorySize.ofGibibytes(24))
                .pciBusId("00000000:17:00.0").build()).build();
        Allocation b = GpuScheduler.builder().inventory(bare).auditLogging(false).build()
                .allocate(GpuRequest.builder().build());
        CudaEnvironment env = r.resolve(b, CudaRequirement.NONE);
        assertThat(env.notes()).anySatisfy(n -> assertThat(n).contains("no NVIDIA driver version is known"));
        assertThat(env.compatibility().orElseThrow().verdict()).isEqualTo(Compatibility.Verdict.UNKNOWN);
    }
}
