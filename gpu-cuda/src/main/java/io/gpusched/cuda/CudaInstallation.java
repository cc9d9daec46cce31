package io.gpusched.cuda;

import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One CUDA installation found on the host.
 *
 * @param root              where it lives (symlinks resolved)
 * @param aliases           other paths that lead to it ({@code /usr/local/cuda} for {@code /usr/local/cuda-13.0})
 * @param version           its version, from the most trusted source present
 * @param versionSource     where the version came from
 * @param runtimeApiVersion what {@code cudaRuntimeGetVersion} of its libcudart answered, when asked
 * @param libraryDir        its library directory ({@code lib64}, {@code lib}, or a pip wheel's {@code lib})
 * @param runtimeLibrary    its {@code libcudart.so.N}
 * @param nvcc              its compiler
 * @param libraries         library names present ({@code cudart}, {@code cublas}, …)
 * @param compatDir         its forward-compatibility directory ({@code compat/} with a {@code libcuda.so})
 * @param pipLayout         true for a pip-wheel layout
 * @param problems          what could not be read (reported, not fatal)
 */
public record CudaInstallation(Path root, List<Path> aliases, Optional<CudaVersion> version,
        Optional<VersionSource> versionSource, Optional<CudaVersion> runtimeApiVersion,
        Optional<Path> libraryDir, Optional<Path> runtimeLibrary, Optional<Path> nvcc,
        List<String> libraries, Optional<Path> compatDir, boolean pipLayout,
        List<String> problems) {

    /** Where a version was read, most trusted first. */
    public enum VersionSource {
        /** {@code version.json}: {@code cuda_cudart.version}, else {@code cuda.version}. */
        VERSION_JSON("version.json"),
        /** {@code version.txt}: {@code CUDA Version 10.2.89}. */
        VERSION_TXT("version.txt"),
        /** {@code include/cuda.h}: {@code #define CUDA_VERSION 12040}. */
        CUDA_H("include/cuda.h"),
        /**
         * The file name {@code libcudart.so.X.Y.Z}, or only the major from {@code libcudart.so.X} (minor read as 0).
         */
        LIBCUDART_SONAME("the libcudart file name"),
        /** A pip wheel's {@code dist-info} of {@code nvidia-cuda-runtime}. */
        PIP_METADATA("pip metadata");

        private final String label;

        VersionSource(String label) {
            this.label = label;
        }

        /** @return where the version was read, as a person names it ({@code include/cuda.h}, {@code version.json}) */
        public String label() {
            return label;
        }
    }

    /** Copies the lists. */
    public CudaInstallation {
        Objects.requireNonNull(root, "root");
        aliases = List.copyOf(aliases);
        libraries = List.copyOf(libraries);
        problems = List.copyOf(problems);
    }

    /** @return true if this installation is reachable as {@code path} (its root or an alias) */
    public boolean isAt(Path path) {
        Path p = path.toAbsolutePath().normalize();
        return root.equals(p) || aliases.contains(p);
    }

    /** @return true if it has a CUDA runtime library */
    public boolean hasRuntime() {
        return runtimeLibrary.isPresent();
    }

    @Override
    public String toString() {
        return "CUDA " + version.map(Object::toString).orElse("?") + " at " + root
                + (aliases.isEmpty() ? "" : " (also " + aliases + ")");
    }
}
