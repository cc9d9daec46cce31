package io.gpusched.core.internal;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;

/** Reads PCI facts from sysfs, shared by the backends. Internal. */
public final class PciSysfs {
    private PciSysfs() {
    }

    /**
     * @param sysfsRoot root of sysfs ({@code /sys})
     * @param address   sysfs PCI address, 4-digit domain, lower case ({@code 0000:06:00.0})
     * @return {@code <sysfs>/bus/pci/devices/<address>/numa_node}; absent, unreadable or -1 reads as empty
     */
    public static OptionalInt numaNode(Path sysfsRoot, String address) {
        Path f = sysfsRoot.resolve("bus/pci/devices").resolve(address).resolve("numa_node");
        try {
            int n = Integer.parseInt(Files.readString(f).trim());
            return n >= 0 ? OptionalInt.of(n) : OptionalInt.empty();
        } catch (IOException | NumberFormatException e) {
            return OptionalInt.empty();
        }
    }
}
