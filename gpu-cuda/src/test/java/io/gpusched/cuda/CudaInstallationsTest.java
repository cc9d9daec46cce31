package io.gpusched.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cuda.CudaInstallation.VersionSource;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CudaInstallationsTest {

    static CudaInstallation at(CudaInstallations.Discovery d, Path root) {
        return d.installations().stream().filter(i -> i.isAt(root)).findFirst()
                .orElseThrow(() -> new AssertionError("no installation at " + root + " in " + d));
    }

    /** Version files that lie: each is a problem on its installation, never an exception out of discover(). */
    @Test
    void lyingVersionFilesAreProblemsNotExceptions(@TempDir Path dir) throws Exception {
        Path local = dir.resolve("usr/local");
        CudaFixtures.file(local.resolve("cuda-a/include/cuda.h"), "#define CUDA_VERSION 0000\n");
        CudaFixtures.file(local.resolve("cuda-a/lib64/libcudart.so.999999999"), "");
        CudaFixtures.file(local.resolve("cuda-b/version.txt"), "CUDA Version 0.5\n");
        CudaFixtures.file(local.resolve("cuda-b/lib64/libcudart.so.0"), "");
        CudaFixtures.file(local.resolve("cuda-c/version.json"), "[".repeat(5000) + "]".repeat(5000));
        CudaFixtures.file(local.resolve("cuda-c/version.txt"), "CUDA Version 12.4.99\n");
        CudaFixtures.file(local.resolve("cuda-c/lib64/libcudart.so.12"), "");
        CudaFixtures.file(dir.resolve("site/nvidia_cuda_runtime_cu12-0.1.2.dist-info/METADATA"), "");
        CudaFixtures.file(dir.resolve("site/nvidia/cuda_runtime/lib/libcudart.so.12"), "");
        CudaInstallations.Discovery d = CudaInstallations.discover(new CudaSearch(dir, Map.of(),
                List.of(dir.resolve("site/nvidia")), false));
        CudaInstallation a = at(d, local.resolve("cuda-a").toRealPath());
        assertThat(a.version()).isEmpty();
        assertThat(a.problems()).anySatisfy(p -> assertThat(p).contains("cuda.h").contains("CUDA_VERSION 0000"))
                .anySatisfy(p -> assertThat(p).contains("libcudart.so.999999999"));
        CudaInstallation b = at(d, local.resolve("cuda-b").toRealPath());
        assertThat(b.version()).isEmpty();
        assertThat(b.problems()).anySatisfy(p -> assertThat(p).contains("version.txt").contains("0.5"));
        CudaInstallation c = at(d, local.resolve("cuda-c").toRealPath());
        assertThat(c.version()).as("falls back to version.txt").contains(new CudaVersion(12, 4, 99));
        assertThat(c.problems()).anySatisfy(p -> assertThat(p).contains("version.json"));
    }

    @Test
    void findsEveryLayoutOnceWithItsVersionSource(@TempDir Path dir) throws Exception {
        Path root = CudaFixtures.host(dir);
        Path pip = CudaFixtures.pip12(dir);
        CudaInstallations.Discovery d = CudaInstallations.discover(new CudaSearch(root,
                Map.of("CUDA_HOME", root.resolve("usr/local/cuda-11.8").toString()), List.of(pip), false));
        Path local = root.resolve("usr/local").toRealPath();

        CudaInstallation c102 = at(d, local.resolve("cuda-10.2"));
        assertThat(c102.version()).contains(new CudaVersion(10, 2, 89));
        assertThat(c102.versionSource()).contains(VersionSource.VERSION_TXT);
        assertThat(c102.nvcc()).isPresent();
        assertThat(c102.runtimeLibrary().orElseThrow().getFileName().toString()).isEqualTo("libcudart.so.10.2");

        CudaInstallation c118 = at(d, local.resolve("cuda-11.8"));
        assertThat(c118.version()).contains(new CudaVersion(11, 8, 89));
        assertThat(c118.versionSource()).contains(VersionSource.VERSION_JSON);
        assertThat(c118.libraries()).contains("cudart", "cublas");

        CudaInstallation c124 = at(d, local.resolve("cuda-12.4"));
        assertThat(c124.aliases()).containsExactly(local.resolve("cuda"));
        assertThat(c124.version()).contains(new CudaVersion(12, 4, 127));
        assertThat(c124.compatDir()).contains(c124.root().resolve("compat"));
        assertThat(d.installations().stream().filter(i -> i.isAt(local.resolve("cuda-12.4")))).hasSize(1);

        CudaInstallation header = at(d, local.resolve("cuda-12.2"));
        assertThat(header.version()).contains(new CudaVersion(12, 2, 0));
        assertThat(header.versionSource()).contains(VersionSource.CUDA_H);
        assertThat(header.hasRuntime()).isFalse();

        CudaInstallation broken = at(d, local.resolve("cuda-12.8"));
        assertThat(broken.version()).contains(new CudaVersion(12, 8, 0));
        assertThat(broken.problems()).anySatisfy(p -> assertThat(p).contains("version.json is unreadable"));

        CudaInstallation wheel = at(d, pip.toRealPath());
        assertThat(wheel.pipLayout()).isTrue();
        assertThat(wheel.version()).contains(new CudaVersion(12, 1, 105));
        assertThat(wheel.versionSource()).contains(VersionSource.PIP_METADATA);

        assertThat(d.problems()).anySatisfy(p -> assertThat(p).startsWith("dangling symlink")
                .contains("cuda-9.9"));
        assertThat(d.problems()).anySatisfy(p -> assertThat(p).contains("cuda-empty")
                .contains("does not look like a CUDA installation"));
        assertThat(d.installations().get(0).version()).contains(new CudaVersion(12, 8, 0));
        assertThat(d.installations()).hasSize(6);
    }

    @Test
    void aBareMajorSonameIsALastResort(@TempDir Path dir) throws Exception {
        Path root = dir.resolve("opt/cuda");
        CudaFixtures.file(root.resolve("lib64/libcudart.so.13"), "");
        CudaInstallation i = CudaInstallations.discover(new CudaSearch(dir, Map.of(), List.of(), false))
                .installations().get(0);
        assertThat(i.version()).contains(new CudaVersion(13, 0, 0));
        assertThat(i.versionSource()).contains(VersionSource.LIBCUDART_SONAME);
        assertThat(i.problems()).anySatisfy(p -> assertThat(p).contains("only the major version"));
    }

    @Test
    void missingConfiguredPathsAreProblems(@TempDir Path dir) {
        CudaInstallations.Discovery d = CudaInstallations.discover(new CudaSearch(dir, Map.of("CUDA_PATH", "/nope"),
                List.of(dir.resolve("missing")), false));
        assertThat(d.installations()).isEmpty();
        assertThat(d.problems()).anySatisfy(p -> assertThat(p).contains("missing").contains("does not exist"))
                .anySatisfy(p -> assertThat(p).contains("/nope"));
    }

    @Test
    void theRealCuda13Installation() throws Exception {
        Path real = Path.of("/usr/local/cuda-13.0");
        assumeTrue(Files.isDirectory(real), "skipped: /usr/local/cuda-13.0 is absent on this machine");
        CudaInstallations.Discovery d = CudaInstallations.discover(CudaSearch.host(List.of()).withRuntimeProbe());
        CudaInstallation i = at(d, real);
        assertThat(i.version().orElseThrow().majorMinor()).isEqualTo(new CudaVersion(13, 0, 0));
        assertThat(i.hasRuntime()).isTrue();
        assertThat(i.nvcc()).isPresent();
        if (Files.isSymbolicLink(Path.of("/usr/local/cuda"))) {
            assertThat(i.aliases()).contains(Path.of("/usr/local/cuda"));
        }
        assertThat(i.runtimeApiVersion()).as("cudaRuntimeGetVersion of its libcudart, no GPU needed")
                .contains(new CudaVersion(13, 0, 0));
    }
}
