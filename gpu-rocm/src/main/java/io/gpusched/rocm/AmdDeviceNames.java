package io.gpusched.rocm;

import java.util.Locale;
import java.util.Map;

/** Product names for common AMD PCI device ids (used when sysfs has no {@code product_name}). */
final class AmdDeviceNames {
    private static final Map<Integer, String> NAMES = Map.ofEntries(
            Map.entry(0x6860, "Radeon Instinct MI25"), Map.entry(0x66A1, "Radeon Instinct MI50/MI60"),
            Map.entry(0x738C, "AMD Instinct MI100"), Map.entry(0x7408, "AMD Instinct MI250X"),
            Map.entry(0x740C, "AMD Instinct MI250X/MI250"), Map.entry(0x740F, "AMD Instinct MI210"),
            Map.entry(0x74A1, "AMD Instinct MI300X"), Map.entry(0x74A2, "AMD Instinct MI308X"),
            Map.entry(0x74A5, "AMD Instinct MI325X"), Map.entry(0x687F, "Radeon RX Vega"),
            Map.entry(0x73BF, "Radeon RX 6800/6900 XT"), Map.entry(0x73DF, "Radeon RX 6700 XT"),
            Map.entry(0x744C, "Radeon RX 7900 XTX/XT"));

    private AmdDeviceNames() {
    }

    static String name(long deviceId) {
        String n = NAMES.get((int) deviceId);
        return n != null ? n : String.format(Locale.ROOT, "AMD GPU 0x%04x", deviceId);
    }
}
