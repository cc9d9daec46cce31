package io.gpusched.client;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What a job needs to see one allocation's GPUs and its CUDA ({@code GET /api/v1/allocations/{id}/environment}): the
 * variables to set, directories to put first on path-like variables, the CUDA installation chosen, and the flags a
 * container runtime needs for the allocation.
 *
 * @param allocation    the allocation's id
 * @param variables     variables to set ({@code CUDA_VISIBLE_DEVICES}, ...)
 * @param pathPrepends  directories to put first on {@code PATH} / {@code LD_LIBRARY_PATH}, in order
 * @param installation  the CUDA installation chosen: its root and version, if one was
 * @param compatibility its verdict against the driver ({@code COMPATIBLE}, ...), if known
 * @param notes         things to know (no driver known, no installation, ...)
 * @param dockerArgs    {@code --device} and {@code -e} flags for {@code docker run}/{@code podman run}; empty where the
 *                      device nodes could not be planned
 * @param cdiArgs       CDI device names and {@code -e} flags (for a spec written by {@code gpusched export cdi}); empty
 *                      likewise
 * @param containerProblem why the container flags are empty (no device node for a GPU, ...), if they are
 */
public record AllocationEnvironment(String allocation, Map<String, String> variables,
        Map<String, List<String>> pathPrepends, Optional<Installation> installation, Optional<String> compatibility,
        List<String> notes, List<String> dockerArgs, List<String> cdiArgs,
        Optional<String> containerProblem) {

    /**
     * A CUDA installation.
     *
     * @param root    its directory
     * @param version its version, if known
     */
    public record Installation(String root, Optional<String> version) {
        /** @throws NullPointerException when root or version is null */
        public Installation {
            Objects.requireNonNull(root, "root");
            Objects.requireNonNull(version, "version");
        }
    }

    /** Copies the collections. */
    public AllocationEnvironment {
        Objects.requireNonNull(allocation, "allocation");
        variables = Collections.unmodifiableMap(new LinkedHashMap<>(variables));
        Map<String, List<String>> p = new LinkedHashMap<>();
        pathPrepends.forEach((k, v) -> p.put(k, List.copyOf(v)));
        pathPrepends = Collections.unmodifiableMap(p);
        Objects.requireNonNull(installation, "installation");
        Objects.requireNonNull(compatibility, "compatibility");
        notes = List.copyOf(notes);
        dockerArgs = List.copyOf(dockerArgs);
        cdiArgs = List.copyOf(cdiArgs);
        Objects.requireNonNull(containerProblem, "containerProblem");
    }
}
