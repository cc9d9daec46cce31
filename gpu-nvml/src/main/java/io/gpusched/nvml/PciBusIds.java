package io.gpusched.nvml;

import io.gpusched.core.internal.PciSysfs;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** PCI bus id forms: NVML's {@code 00000000:06:00.0}, sysfs's {@code 0000:06:00.0}. */
final class PciBusIds {
    private static final Pattern BDF =
            Pattern.compile("(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\\.([0-7])");

    private PciBusIds() {
    }

    /** @return the canonical NVML form, 8-digit domain, upper case; empty if not a bus id */
    static Optional<String> normalize(String busId) {
        Matcher m = BDF.matcher(busId.trim());
        if (!m.matches()) {
            return Optional.empty();
        }
        long domain = m.group(1) == null ? 0 : Long.parseLong(m.group(1), 16);
        return Optional.of(String.format(Locale.ROOT, "%08X:%02X:%02X.%s", domain, Integer.parseInt(m.group(2), 16),
                Integer.parseInt(m.group(3), 16), m.group(4)));
    }

    /** @return the sysfs directory name, 4-digit domain, lower case */
    static Optional<String> sysfsName(String busId) {
        Matcher m = BDF.matcher(busId.trim());
        if (!m.matches()) {
            return Optional.empty();
        }
        long domain = m.group(1) == null ? 0 : Long.parseLong(m.group(1), 16);
        return Optional.of(String.format(Locale.ROOT, "%04x:%02x:%02x.%s", domain & 0xFFFF,
                Integer.parseInt(m.group(2), 16), Integer.parseInt(m.group(3), 16), m.group(4)));
    }

    /** @return the NUMA node of a PCI device from {@code <sysfs>/bus/pci/devices/<bdf>/numa_node}; -1 reads as empty */
    static OptionalInt numaNode(Path sysfsRoot, String busId) {
        return sysfsName(busId).map(n -> PciSysfs.numaNode(sysfsRoot, n))
                .orElse(OptionalInt.empty());
    }
}
