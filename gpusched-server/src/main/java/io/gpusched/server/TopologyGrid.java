package io.gpusched.server;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import java.util.ArrayList;
import java.util.List;

/** The link matrix as nvidia-smi topo -m labels it: X, NV#/XG# (NVLink/XGMI with # links), PIX, PXB, PHB, NODE, SYS. */
public final class TopologyGrid {
    private TopologyGrid() {
    }

    /**
     * @param a first device
     * @param b second device
     * @param t the node's topology
     * @return the label of the link between them
     */
    public static String label(GpuDevice a, GpuDevice b, GpuTopology t) {
        if (a.index() == b.index()) {
            return "X";
        }
        int links = t.linkCount(a.index(), b.index());
        if (links > 0) {
            return (a.vendor() == GpuVendor.AMD ? "XG" : "NV") + links;
        }
        return t.pcieLevel(a.index(), b.index()).legend();
    }

    /**
     * @param devices the node's devices
     * @param t       the node's topology
     * @return rows of labels, one per device, in the order of {@code devices}
     */
    public static List<List<String>> matrix(List<GpuDevice> devices, GpuTopology t) {
        List<List<String>> rows = new ArrayList<>();
        for (GpuDevice a : devices) {
            List<String> row = new ArrayList<>();
            for (GpuDevice b : devices) {
                row.add(label(a, b, t));
            }
            rows.add(row);
        }
        return rows;
    }
}
