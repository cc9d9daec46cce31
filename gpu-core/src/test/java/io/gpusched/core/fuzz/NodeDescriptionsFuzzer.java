package io.gpusched.core.fuzz;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.devices.CharMajors;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Fuzz target for {@link NodeDescriptions#parse(String, String)}: only GpuConfigException whose message starts with
 * the source name; a parsed node has devices with distinct indices, every device the same valid {@code char_majors},
 * plain-token UUIDs and printable names, no minor or PCI bus id shared but by partitions of one parent, no parent that
 * is one of its devices, and its topology answers for every pair.
 */
public final class NodeDescriptionsFuzzer {
    private static final String SOURCE = "node.yaml";

    private static final Pattern TOKEN = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._:/-]*");

    private NodeDescriptionsFuzzer() {
    }

    private static boolean sameParent(GpuDevice a, GpuDevice b) {
        return a.parentUuid().isPresent() && a.parentUuid().equals(b.parentUuid());
    }

    /** One input: the YAML node description (UTF-8). */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = Contract.text(input);
        SimulatedGpuInventory inv = Contract.expect(GpuConfigException.class, s, msg -> msg.startsWith(SOURCE + ": "),
                () -> NodeDescriptions.parse(s, SOURCE));
        if (inv != null) {
            try (inv) {
                Set<Integer> seen = new HashSet<>();
                Map<String, GpuDevice> minors = new HashMap<>();
                Map<String, GpuDevice> buses = new HashMap<>();
                Set<String> uuids = new HashSet<>();
                inv.devices().forEach(d -> uuids.add(d.uuid()));
                for (GpuDevice d : inv.devices()) {
                    Contract.check(seen.add(d.index()), "index " + d.index() + " twice", s);
                    // issue 36: identifiers are plain tokens and printable text; no two devices share a node or a
                    // PCI function unless partitions of one parent; a parent is never a device of the node
                    Contract.check(TOKEN.matcher(d.uuid()).matches() && d.uuid().length() <= 128, "uuid "
                            + d.uuid().replaceAll("\\p{Cntrl}", "?") + " is not a plain token", s);
                    Contract.check(d.name().codePoints().noneMatch(Character::isISOControl), "a name with a control"
                            + " character", s);
                    Contract.check(d.parentUuid().map(p -> !uuids.contains(p)).orElse(true), "parent "
                            + d.parentUuid().orElse("") + " is a device of the node", s);
                    if (d.minor().isPresent()) {
                        GpuDevice o = minors.put(d.vendor() + "/" + d.minor().getAsInt(), d);
                        Contract.check(o == null || sameParent(o, d), "minor " + d.minor().getAsInt() + " twice", s);
                    }
                    GpuDevice o = buses.put(d.pciBusId().toLowerCase(Locale.ROOT).replaceFirst("^0000([0-9a-f]{4}:)",
                            "$1"), d);
                    Contract.check(o == null || sameParent(o, d), "pci_bus_id " + d.pciBusId() + " twice", s);
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
