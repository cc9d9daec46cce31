package io.gpusched.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.OptionalInt;

/**
 * How the devices of a node are connected, pair by pair: the number of NVLink (NVIDIA) or XGMI (AMD) links between
 * them and their {@link PcieLevel}. Immutable; computed once per inventory. Pairs over an NVSwitch fabric carry the
 * link count of the fabric, so they read as all-to-all.
 */
public final class GpuTopology {

    /**
     * The connection between two devices.
     *
     * @param a         lower device index
     * @param b         higher device index
     * @param linkCount NVLink/XGMI links between them (0 if none)
     * @param pcie      PCIe proximity
     */
    public record Link(int a, int b, int linkCount, PcieLevel pcie) {
    }

    private final int[] indices;
    private final int[] position;
    private final int[][] links;
    private final PcieLevel[][] levels;
    private final OptionalInt[] numa;

    private GpuTopology(int[] indices, int[] position, int[][] links, PcieLevel[][] levels, OptionalInt[] numa) {
        this.indices = indices;
        this.position = position;
        this.links = links;
        this.levels = levels;
        this.numa = numa;
    }

    /** @return the device indices this topology covers, ascending */
    public List<Integer> deviceIndices() {
        return Arrays.stream(indices).boxed().toList();
    }

    /** @return the number of devices covered */
    public int size() {
        return indices.length;
    }

    /** @return NVLink/XGMI link count between two devices (0 for the same device or no link) */
    public int linkCount(int a, int b) {
        return a == b ? 0 : links[pos(a)][pos(b)];
    }

    /** @return PCIe proximity of two devices ({@link PcieLevel#INTERNAL} for the same device) */
    public PcieLevel pcieLevel(int a, int b) {
        return a == b ? PcieLevel.INTERNAL : levels[pos(a)][pos(b)];
    }

    /** @return the NUMA node of a device, if known */
    public OptionalInt numaNode(int index) {
        return numa[pos(index)];
    }

    /** @return every pair, {@code a < b}, in index order */
    public List<Link> links() {
        List<Link> out = new ArrayList<>();
        for (int i = 0; i < indices.length; i++) {
            for (int j = i + 1; j < indices.length; j++) {
                out.add(new Link(indices[i], indices[j], links[i][j], levels[i][j]));
            }
        }
        return out;
    }

    private int pos(int index) {
        int p = index >= 0 && index < position.length ? position[index] : -1;
        if (p < 0) {
            throw new IllegalArgumentException("device index " + index + " is not in this topology; devices are "
                    + deviceIndices());
        }
        return p;
    }

    /** @return a topology with no links, PCIe level NODE within a NUMA node and SYSTEM across or when unknown */
    public static GpuTopology unconnected(List<GpuDevice> devices) {
        return builder(devices).build();
    }

    /** @return a builder over these devices; unspecified pairs default as in {@link #unconnected(List)} */
    public static Builder builder(List<GpuDevice> devices) {
        return new Builder(devices);
    }

    /** Builds a {@link GpuTopology}; symmetric by construction. */
    public static final class Builder {
        private final int[] indices;
        private final int[] position;
        private final int[][] links;
        private final PcieLevel[][] levels;
        private final OptionalInt[] numa;

        private Builder(List<GpuDevice> devices) {
            Objects.requireNonNull(devices, "devices");
            indices = devices.stream().mapToInt(GpuDevice::index).sorted().toArray();
            int max = indices.length == 0 ? -1 : indices[indices.length - 1];
            position = new int[max + 1];
            Arrays.fill(position, -1);
            for (int i = 0; i < indices.length; i++) {
                if (position[indices[i]] >= 0) {
                    throw new IllegalArgumentException("device index " + indices[i] + " appears twice");
                }
                position[indices[i]] = i;
            }
            int n = indices.length;
            links = new int[n][n];
            levels = new PcieLevel[n][n];
            numa = new OptionalInt[n];
            for (GpuDevice d : devices) {
                numa[position[d.index()]] = d.numaNode();
            }
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < n; j++) {
                    boolean sameNuma = numa[i].isPresent() && numa[i].equals(numa[j]);
                    levels[i][j] = i == j ? PcieLevel.INTERNAL : sameNuma ? PcieLevel.NODE : PcieLevel.SYSTEM;
                }
            }
        }

        private int pos(int index) {
            int p = index >= 0 && index < position.length ? position[index] : -1;
            if (p < 0) {
                throw new IllegalArgumentException("device index " + index + " is not on this node");
            }
            return p;
        }

        /** Sets the NVLink/XGMI link count between two distinct devices. @return this */
        public Builder links(int a, int b, int count) {
            if (a == b || count < 0) {
                throw new IllegalArgumentException("a link needs two distinct devices and a count >= 0; got "
                        + a + "-" + b + " x" + count);
            }
            links[pos(a)][pos(b)] = count;
            links[pos(b)][pos(a)] = count;
            return this;
        }

        /** Sets the PCIe level between two distinct devices. @return this */
        public Builder pcie(int a, int b, PcieLevel level) {
            if (a == b) {
                throw new IllegalArgumentException("a PCIe level needs two distinct devices; got " + a + "-" + b);
            }
            levels[pos(a)][pos(b)] = Objects.requireNonNull(level, "level");
            levels[pos(b)][pos(a)] = level;
            return this;
        }

        /** @return the topology */
        public GpuTopology build() {
            int n = indices.length;
            int[][] l = new int[n][];
            PcieLevel[][] p = new PcieLevel[n][];
            for (int i = 0; i < n; i++) {
                l[i] = links[i].clone();
                p[i] = levels[i].clone();
            }
            return new GpuTopology(indices.clone(), position.clone(), l, p, numa.clone());
        }
    }
}
