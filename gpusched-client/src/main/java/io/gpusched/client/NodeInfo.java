package io.gpusched.client;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The facts of the node a client is served by ({@code GET /api/v1/node}).
 *
 * @param hostname       the node's host name
 * @param backend        the inventory's backend ({@code nvml}, {@code simulated:dgx1-v100}, ...)
 * @param simulated      whether the node is simulated
 * @param gpus           how many GPUs it has
 * @param strategy       the allocation strategy's name
 * @param version        the gpusched version serving it
 * @param stateDirectory the node ledger's directory, where the server says
 * @param enabled        whether allocation is enabled ({@code gpu.enabled})
 * @param drainSupported whether released GPUs drain (the inventory can list processes)
 * @param notes          things to know about the node's scheduler (no drain, recovery problems)
 */
public record NodeInfo(String hostname, String backend, boolean simulated, int gpus, String strategy, String version,
        Optional<String> stateDirectory, boolean enabled, boolean drainSupported, List<String> notes) {

    /** Copies the list. */
    public NodeInfo {
        Objects.requireNonNull(hostname, "hostname");
        Objects.requireNonNull(backend, "backend");
        Objects.requireNonNull(strategy, "strategy");
        Objects.requireNonNull(version, "version");
        Objects.requireNonNull(stateDirectory, "stateDirectory");
        notes = List.copyOf(notes);
    }
}
