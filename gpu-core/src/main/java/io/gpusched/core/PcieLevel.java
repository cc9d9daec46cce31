package io.gpusched.core;

import java.util.Locale;

/**
 * How close two GPUs are on the PCIe tree, mirroring NVML's {@code nvmlGpuTopologyLevel_t} and the
 * {@code nvidia-smi topo -m} legend. Declared from closest to farthest.
 */
public enum PcieLevel {
    /** Same board (e.g. the two GPUs of a dual-GPU card). */
    INTERNAL("BRD"),
    /** Behind one PCIe switch (PIX). */
    SINGLE("PIX"),
    /** Behind several PCIe switches, without crossing a host bridge (PXB). */
    MULTIPLE("PXB"),
    /** Through a PCIe host bridge (PHB). */
    HOSTBRIDGE("PHB"),
    /** Across host bridges within one NUMA node (NODE). */
    NODE("NODE"),
    /** Across the inter-socket interconnect (SYS). */
    SYSTEM("SYS");

    private final String legend;

    PcieLevel(String legend) {
        this.legend = legend;
    }

    /** @return the {@code nvidia-smi topo -m} abbreviation (PIX, PXB, PHB, NODE, SYS; BRD for same board) */
    public String legend() {
        return legend;
    }

    /**
     * Parses an enum name or a legend abbreviation, case-insensitively.
     *
     * @throws IllegalArgumentException naming the input and the valid values
     */
    public static PcieLevel parse(String text) {
        if (text != null) {
            String t = text.trim().toUpperCase(Locale.ROOT);
            for (PcieLevel l : values()) {
                if (l.name().equals(t) || l.legend.equals(t)) {
                    return l;
                }
            }
        }
        throw new IllegalArgumentException("unknown PCIe level \"" + text
                + "\"; expected INTERNAL, SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM (or BRD, PIX, PXB, PHB, NODE,"
                + " SYS)");
    }
}
