package io.gpusched.core;

import java.util.Arrays;
import java.util.Locale;

/** Who made a GPU, which decides its device nodes and the job environment it needs. */
public enum GpuVendor {
    /** NVIDIA: CUDA, NVML, {@code /dev/nvidia*}. */
    NVIDIA,
    /** AMD: ROCm, ROCm SMI, {@code /dev/kfd} and DRM render nodes. */
    AMD;

    /**
     * Parses a vendor name, case-insensitively ({@code "nvidia"}, {@code "AMD"}).
     *
     * @throws IllegalArgumentException naming the input and the valid vendors
     */
    public static GpuVendor parse(String text) {
        if (text != null) {
            String t = text.trim().toUpperCase(Locale.ROOT);
            for (GpuVendor v : values()) {
                if (v.name().equals(t)) {
                    return v;
                }
            }
        }
        throw new IllegalArgumentException("unknown GPU vendor \"" + text + "\"; expected one of "
                + Arrays.toString(values()));
    }
}
