package io.gpusched.core;

import io.gpusched.core.internal.StrictYaml;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * gpusched's configuration, validated once when built or loaded and immutable after. YAML form:
 * <pre>
 * gpu:
 *   enabled: true              # false: every allocate fails with DISABLED
 *   strategy: packing          # packing | spreading
 *   backends: [nvml, procfs]   # providers to try, in order; empty: every provider by priority
 *   cuda_paths: [/opt/cuda]    # extra CUDA installations to consider
 *   max_gpus_per_request: 0    # 0: no limit
 *   allow_sharing: true        # false: SHARED requests are refused
 * </pre>
 * Unknown keys are rejected with their path named.
 *
 * @param enabled           whether the scheduler hands out GPUs at all
 * @param strategy          name of the allocation strategy
 * @param backends          inventory providers to try, in order; empty means all by priority
 * @param cudaPaths         extra CUDA installation roots
 * @param maxGpusPerRequest largest GPU count one request may ask for; 0 means no limit
 * @param allowSharing      whether SHARED requests are accepted
 */
public record GpuConfig(
        boolean enabled,
        String strategy,
        List<String> backends,
        List<Path> cudaPaths,
        int maxGpusPerRequest,
        boolean allowSharing) {

    private static final Set<String> ROOT_KEYS = Set.of("gpu");
    private static final Set<String> GPU_KEYS =
            Set.of("enabled", "strategy", "backends", "cuda_paths", "max_gpus_per_request", "allow_sharing");

    /** @throws GpuConfigException naming the invalid setting */
    public GpuConfig {
        Objects.requireNonNull(strategy, "strategy");
        if (!AllocationStrategies.names().contains(strategy)) {
            throw new GpuConfigException("gpu.strategy: unknown strategy \"" + strategy + "\"; valid strategies are "
                    + AllocationStrategies.names());
        }
        backends = List.copyOf(backends);
        for (String b : backends) {
            if (b.isBlank()) {
                throw new GpuConfigException("gpu.backends: backend names must not be blank");
            }
        }
        cudaPaths = List.copyOf(cudaPaths);
        if (maxGpusPerRequest < 0) {
            throw new GpuConfigException("gpu.max_gpus_per_request: must be >= 0 (0 = no limit), was "
                    + maxGpusPerRequest);
        }
    }

    /** @return the defaults: enabled, packing, all backends, no extra CUDA paths, no size limit, sharing allowed */
    public static GpuConfig defaults() {
        return builder().build();
    }

    /**
     * Loads a YAML file.
     *
     * @throws GpuConfigException if the file cannot be read or a setting is invalid (the message names its path)
     */
    public static GpuConfig load(Path file) {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new GpuConfigException("cannot read configuration " + file + ": " + e.getMessage(), e);
        }
        return parse(text, file.toString());
    }

    /**
     * Parses YAML text.
     *
     * @param yaml   the document
     * @param source a name for error messages (file name)
     * @throws GpuConfigException if a setting is invalid; the message names its key path
     */
    public static GpuConfig parse(String yaml, String source) {
        StrictYaml root = StrictYaml.parse(yaml, source).onlyKeys(ROOT_KEYS);
        StrictYaml gpu = root.child("gpu").onlyKeys(GPU_KEYS);
        Builder b = builder()
                .enabled(gpu.bool("enabled", true))
                .strategy(gpu.string("strategy", "packing"))
                .backends(gpu.strings("backends"))
                .maxGpusPerRequest(gpu.integer("max_gpus_per_request", 0, 0, Integer.MAX_VALUE))
                .allowSharing(gpu.bool("allow_sharing", true));
        List<Path> paths = new ArrayList<>();
        for (String p : gpu.strings("cuda_paths")) {
            paths.add(Path.of(p));
        }
        b.cudaPaths(paths);
        try {
            return b.build();
        } catch (GpuConfigException e) {
            throw new GpuConfigException(source + ": " + e.getMessage(), e);
        }
    }

    /** @return a builder with the defaults */
    public static Builder builder() {
        return new Builder();
    }

    /** Builds a {@link GpuConfig}; {@link #build()} validates. */
    public static final class Builder {
        private boolean enabled = true;
        private String strategy = "packing";
        private List<String> backends = List.of();
        private List<Path> cudaPaths = List.of();
        private int maxGpusPerRequest;
        private boolean allowSharing = true;

        private Builder() {
        }

        /** @return this */
        public Builder enabled(boolean v) { enabled = v; return this; }
        /** @return this */
        public Builder strategy(String v) { strategy = Objects.requireNonNull(v, "strategy"); return this; }
        /** @return this */
        public Builder backends(List<String> v) { backends = List.copyOf(v); return this; }
        /** @return this */
        public Builder cudaPaths(List<Path> v) { cudaPaths = List.copyOf(v); return this; }
        /** @return this */
        public Builder maxGpusPerRequest(int v) { maxGpusPerRequest = v; return this; }
        /** @return this */
        public Builder allowSharing(boolean v) { allowSharing = v; return this; }

        /** @return the validated configuration */
        public GpuConfig build() {
            return new GpuConfig(enabled, strategy, backends, cudaPaths, maxGpusPerRequest, allowSharing);
        }
    }
}
