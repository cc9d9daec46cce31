package io.gpusched.core.fuzz;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.devices.CharMajors;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.HashSet;
import java.util.Set;

/**
 * Fuzz target for {@link NodeDescriptions#parse(String, String)}: only GpuConfigException whose message starts with
 * the source name; a parsed node has devices with distinct indices, every device the same valid {@code char_majors},
 * and its topology answers for every pair.
 */
public final class NodeDescriptionsFuzzer {
    private static final String SOURCE = "node.yaml";

    private NodeDescriptionsFuzzer() {
    }

    /** One input: the YAML node description (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        SimulatedGpuInventory inv = Contract.expect(GpuConfigException.class, s, msg -> msg.startsWith(SOURCE + ": "),
                () -> NodeDescriptions.parse(s, SOURCE));
        if (inv != null) {
            try (inv) {
                Set<Integer> seen = new HashSet<>();
                for (GpuDevice d : inv.devices()) {
                    Contract.check(seen.add(d.index()), "index " + d.index() + " twice", s);
                }
                Contract.check(!seen.isEmpty(), "a node without devices", s);
                Set<String> majors = new HashSet<>();
                inv.devices().forEach(d -> majors.add(d.properties().get(GpuDeviceNodes.CHAR_MAJORS_PROPERTY)));
                Contract.check(majors.size() == 1 && !majors.contains(null), "devices describe different or no char"
                        + " majors: " + majors, s);
                CharMajors.parse(majors.iterator().next());
                var topo = inv.topology();
                for (GpuDevice a : inv.devices()) {
                    for (GpuDevice b : inv.devices()) {
                        if (a.index() != b.index()) {
                            topo.pcieLevel(a.index(), b.index());
                        }
                    }
                    if (inv.devices().size() > 64) {
                        break;
                    }
                }
            }
        }
    }
}
