package io.gpusched.rocm.internal;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import io.gpusched.rocm.internal.RocmSmiBinding.Core;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import java.util.OptionalLong;

/**
 * Plain-value reads over the ROCm SMI binding, and a sampler that fills a reused {@code long[]} with one native block
 * per device. Internal: callers see no JNA type.
 */
public final class RocmSmiReader {
    static final int MEM_VRAM = 0;
    static final int TEMP_EDGE = 0;
    static final int TEMP_JUNCTION = 1;
    static final int TEMP_CURRENT = 0;
    /** Marker for a value not reported. */
    public static final long ABSENT = Long.MIN_VALUE;

    private final Memory m = new Memory(256);

    /** @return {@code rsmi_num_monitor_devices}, or the status as a negative number */
    public int deviceCount() {
        int rc = Core.rsmi_num_monitor_devices(Pointer.nativeValue(m));
        return rc == 0 ? m.getInt(0) : -Math.abs(rc);
    }

    /** @return the PCI address "dddd:bb:dd.f" decoded from the BDF id (domain 63:32, bus 15:8, device 7:3, fn 2:0) */
    public String pciAddress(int dv) {
        if (Core.rsmi_dev_pci_id_get(dv, Pointer.nativeValue(m)) != 0) {
            return null;
        }
        long bdf = m.getLong(0);
        return String.format(Locale.ROOT, "%04x:%02x:%02x.%x", (bdf >>> 32) & 0xFFFFFFFFL, (bdf >> 8) & 0xFF,
                (bdf >> 3) & 0x1F, bdf & 0x7);
    }

    /** @return the raw BDF id of {@code rsmi_dev_pci_id_get}, if it answers */
    public OptionalLong bdfId(int dv) {
        return Core.rsmi_dev_pci_id_get(dv, Pointer.nativeValue(m)) == 0 ? OptionalLong.of(m.getLong(0))
                : OptionalLong.empty();
    }

    /** @return the product name, or null */
    public String name(int dv) {
        return Core.rsmi_dev_name_get(dv, Pointer.nativeValue(m), 256) == 0
                ? m.getString(0, StandardCharsets.UTF_8.name()) : null;
    }

    /** @return the unique id, if reported */
    public OptionalLong uniqueId(int dv) {
        return Core.rsmi_dev_unique_id_get(dv, Pointer.nativeValue(m)) == 0 ? OptionalLong.of(m.getLong(0))
                : OptionalLong.empty();
    }

    /** @return total VRAM in bytes, if reported */
    public OptionalLong vramTotal(int dv) {
        return Core.rsmi_dev_memory_total_get(dv, MEM_VRAM, Pointer.nativeValue(m)) == 0 ? OptionalLong.of(m.getLong(0))
                : OptionalLong.empty();
    }

    /** Reads busy %, VRAM used (bytes), temperature (m°C, edge else junction) and power (µW) per device. */
    public static final class Sampler {
        /** Values per device: busy, vram used, millidegrees, microwatts. */
        public static final int STRIDE = 4;
        private final int[] devices;
        private final Memory[] blocks;
        private final long[] values;

        /** @param devices ROCm SMI indices, -1 for devices it does not know */
        public Sampler(int[] devices) {
            this.devices = devices.clone();
            this.blocks = new Memory[devices.length];
            for (int i = 0; i < blocks.length; i++) {
                blocks[i] = new Memory(16);
            }
            this.values = new long[devices.length * STRIDE];
        }

        /** @return the array {@link #sweep()} fills */
        public long[] values() {
            return values;
        }

        /** Reads every device once; absent values are {@link #ABSENT}. */
        public void sweep() {
            boolean powerGet = RocmSmiBinding.hasPowerGet();
            for (int i = 0; i < devices.length; i++) {
                int dv = devices[i];
                int base = i * STRIDE;
                Arrays.fill(values, base, base + STRIDE, ABSENT);
                if (dv < 0) {
                    continue;
                }
                Memory b = blocks[i];
                long a = Pointer.nativeValue(b);
                if (Core.rsmi_dev_busy_percent_get(dv, a) == 0) {
                    values[base] = b.getInt(0) & 0xFFFFFFFFL;
                }
                if (Core.rsmi_dev_memory_usage_get(dv, MEM_VRAM, a) == 0) {
                    values[base + 1] = b.getLong(0);
                }
                if (Core.rsmi_dev_temp_metric_get(dv, TEMP_EDGE, TEMP_CURRENT, a) == 0
                        || Core.rsmi_dev_temp_metric_get(dv, TEMP_JUNCTION, TEMP_CURRENT, a) == 0) {
                    values[base + 2] = b.getLong(0);
                }
                if ((powerGet && RocmSmiBinding.PowerGet.rsmi_dev_power_get(dv, a, a + 8) == 0)
                        || Core.rsmi_dev_power_ave_get(dv, 0, a) == 0) {
                    values[base + 3] = b.getLong(0);
                }
            }
        }
    }
}
