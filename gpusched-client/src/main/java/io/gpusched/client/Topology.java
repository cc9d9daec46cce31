package io.gpusched.client;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * How the node's GPUs are connected ({@code GET /api/v1/topology}), as {@code nvidia-smi topo -m} prints it.
 *
 * @param devices the device indices, in the order of the matrix's rows and columns
 * @param matrix  the link between each pair ({@code X} self, {@code NV4}, {@code PIX}, {@code SYS}, ...)
 * @param numa    each device's NUMA node, or null where unknown
 * @param legend  what the link names mean
 */
public record Topology(List<Integer> devices, List<List<String>> matrix, List<Integer> numa, String legend) {

    /** Copies the lists. */
    public Topology {
        devices = List.copyOf(devices);
        List<List<String>> rows = new ArrayList<>();
        for (List<String> r : matrix) {
            rows.add(List.copyOf(r));
        }
        matrix = List.copyOf(rows);
        numa = Collections.unmodifiableList(new ArrayList<>(numa));
        Objects.requireNonNull(legend, "legend");
    }
}
