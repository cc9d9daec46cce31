package io.gpusched.rocm;

import java.util.Locale;

/**
 * Keys that join a ROCm SMI device to its KFD node: PCI domain, bus, device and partition. KFD's {@code location_id}
 * carries the partition of a CPX/NPS GPU in its function bits; ROCm SMI's BDF id carries it in bits 31:28 (ROCm 6) or,
 * like KFD, in the function bits. The function bits are never compared as such, since the two disagree on them.
 */
final class PciKeys {
    private PciKeys() {
    }

    /** @return the key of a ROCm SMI BDF id (domain 63:32, partition 31:28, bus 15:8, device 7:3, function 2:0) */
    static String ofSmiBdf(long bdf) {
        long partition = (bdf >>> 28) & 0xF;
        if (partition == 0) {
            partition = bdf & 0x7;
        }
        return key((bdf >>> 32) & 0xFFFFFFFFL, (bdf >> 8) & 0xFF, (bdf >> 3) & 0x1F, partition);
    }

    /** @return the key of a KFD node's domain and {@code location_id} (bus 15:8, device 7:3, partition 2:0) */
    static String ofKfd(long domain, long locationId) {
        return key(domain, (locationId >> 8) & 0xFF, (locationId >> 3) & 0x1F, locationId & 0x7);
    }

    private static String key(long domain, long bus, long device, long partition) {
        return String.format(Locale.ROOT, "%04x:%02x:%02x/p%d", domain, bus, device, partition);
    }
}
