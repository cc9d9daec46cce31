package io.gpusched.core;

import java.util.Map;
import java.util.Objects;

/**
 * Whom a process using a GPU works for, as a {@link ProcessAttribution} tells it: a gpusched allocation, or, where
 * another system owns the GPUs (the kubelet, Slurm), a pod or a job.
 *
 * @param kind   what the owner is
 * @param id     its id: the allocation id, {@code <namespace>/<pod>}, the Slurm job id
 * @param labels more about it (e.g. {@code container}, {@code namespace}); may be empty
 */
public record UsageOwner(Kind kind, String id, Map<String, String> labels) {

    /** What kind of owner. */
    public enum Kind {
        /** An allocation of this node's ledger. */
        ALLOCATION,
        /** A Kubernetes pod (from the kubelet's PodResources API). */
        POD,
        /** A Slurm job (from the process's cgroup). */
        SLURM_JOB
    }

    /** Copies the labels. */
    public UsageOwner {
        Objects.requireNonNull(kind, "kind");
        if (id == null || id.isEmpty()) {
            throw new IllegalArgumentException("a usage owner needs an id");
        }
        labels = Map.copyOf(labels);
    }

    /** @return the owner that is this node's allocation {@code id} */
    public static UsageOwner allocation(String id) {
        return new UsageOwner(Kind.ALLOCATION, id, Map.of());
    }
}
