package io.gpusched.cuda;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Where to look for CUDA installations.
 *
 * @param fsRoot       prefix for the standard locations ({@code /} on a host; a temp dir in tests)
 * @param environment  environment to read {@code CUDA_HOME} and {@code CUDA_PATH} from
 * @param extraPaths   more roots ({@code gpu.cuda_paths} of the configuration)
 * @param probeRuntime whether to ask each installation's libcudart for its version through JNA
 */
public record CudaSearch(Path fsRoot, Map<String, String> environment, List<Path> extraPaths, boolean probeRuntime) {

    /** Copies the collections. */
    public CudaSearch {
        Objects.requireNonNull(fsRoot, "fsRoot");
        environment = Map.copyOf(environment);
        extraPaths = List.copyOf(extraPaths);
    }

    /** @return the host's standard locations, this process's environment, and the given extra paths */
    public static CudaSearch host(List<Path> extraPaths) {
        return new CudaSearch(Path.of("/"), System.getenv(), extraPaths, false);
    }

    /** @return a copy that asks libcudart for its version */
    public CudaSearch withRuntimeProbe() {
        return new CudaSearch(fsRoot, environment, extraPaths, true);
    }
}
