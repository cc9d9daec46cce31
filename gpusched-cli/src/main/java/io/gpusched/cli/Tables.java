package io.gpusched.cli;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.internal.Printable;
import io.gpusched.server.TopologyGrid;
import java.util.ArrayList;
import java.util.List;

/** Plain-text tables for the examples and the command: device list and link matrix. */
public final class Tables {

    private Tables() {
    }

    /** @return one row per device: index, name, memory, CC/arch, PCI bus id, NUMA node, UUID */
    public static String devices(List<GpuDevice> devices) {
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[]{"IDX", "NAME", "MEMORY", "CC/ARCH", "PCI BUS ID", "NUMA", "MINOR", "UUID"});
        for (GpuDevice d : devices) {
            rows.add(new String[]{
                String.valueOf(d.index()), d.name(), d.memory().toHumanString(),
                d.computeCapability().map(Object::toString).orElse(d.architecture().orElse("-")),
                d.pciBusId(),
                d.numaNode().isPresent() ? String.valueOf(d.numaNode().getAsInt()) : "-",
                d.minor().isPresent() ? String.valueOf(d.minor().getAsInt()) : "-",
                d.uuid()});
        }
        return format(rows);
    }

    /**
     * @return the link matrix in the style of {@code nvidia-smi topo -m}: NV# (NVLink) or XG# (XGMI) with the link
     *         count, else the PCIe legend (PIX, PXB, PHB, NODE, SYS), plus each GPU's NUMA node
     */
    public static String topology(List<GpuDevice> devices, GpuTopology t) {
        List<String[]> rows = new ArrayList<>();
        String[] head = new String[devices.size() + 2];
        head[0] = "";
        for (int j = 0; j < devices.size(); j++) {
            head[j + 1] = "GPU" + devices.get(j).index();
        }
        head[devices.size() + 1] = "NUMA";
        rows.add(head);
        for (GpuDevice a : devices) {
            String[] row = new String[devices.size() + 2];
            row[0] = "GPU" + a.index();
            for (int j = 0; j < devices.size(); j++) {
                GpuDevice b = devices.get(j);
                row[j + 1] = cell(a, b, t);
            }
            row[devices.size() + 1] = t.numaNode(a.index()).isPresent()
                    ? String.valueOf(t.numaNode(a.index()).getAsInt()) : "N/A";
            rows.add(row);
        }
        return format(rows) + "Legend: X self; NV#/XG# NVLink/XGMI with # links; PIX one PCIe switch; PXB several;"
                + " PHB host bridge; NODE within a NUMA node; SYS across sockets\n";
    }

    static String cell(GpuDevice a, GpuDevice b, GpuTopology t) {
        return TopologyGrid.label(a, b, t);
    }

    /**
     * @return rows laid out in left-aligned columns separated by two spaces; every cell is escaped
     *         ({@link Printable#escape}): a device name, owner or job holding control characters cannot move the
     *         cursor or start a line of its own
     */
    public static String format(List<String[]> table) {
        List<String[]> rows = new ArrayList<>(table.size());
        for (String[] r : table) {
            String[] e = new String[r.length];
            for (int i = 0; i < r.length; i++) {
                e[i] = Printable.escape(r[i]);
            }
            rows.add(e);
        }
        int cols = rows.stream().mapToInt(r -> r.length).max().orElse(0);
        int[] width = new int[cols];
        for (String[] r : rows) {
            for (int i = 0; i < r.length; i++) {
                width[i] = Math.max(width[i], r[i].length());
            }
        }
        StringBuilder sb = new StringBuilder();
        for (String[] r : rows) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < r.length; i++) {
                line.append(r[i]);
                if (i < r.length - 1) {
                    line.append(" ".repeat(width[i] - r[i].length() + 2));
                }
            }
            sb.append(line.toString().stripTrailing()).append('\n');
        }
        return sb.toString();
    }
}
