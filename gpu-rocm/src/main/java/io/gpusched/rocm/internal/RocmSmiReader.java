package io.gpusched.rocm.internal;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import io.gpusched.rocm.internal.RocmSmiBinding.Core;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
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

    /** Bytes of one {@code rsmi_process_info_t} (pid, pasid, vram, sdma, cu_occupancy; padded to 8). */
    public static final long PROCESS_INFO_SIZE = 32;
    /** Most processes read from ROCm SMI's list. */
    static final int MAX_PROCESSES = 4096;
    /** Most GPUs read for one process. */
    static final int MAX_GPUS = 64;

    /**
     * ROCm SMI's compute processes.
     *
     * @param status    {@code rsmi_compute_process_info_get}'s status (0: the list is complete)
     * @param processes one row per process: pid, VRAM in bytes (summed over all its GPUs), then the ROCm SMI indices of
     *                  the GPUs it uses (none where {@code rsmi_compute_process_gpus_get} did not answer)
     */
    public record SmiProcesses(int status, List<long[]> processes) {
        /** Copies the list. */
        public SmiProcesses {
            processes = List.copyOf(processes);
        }
    }

    /**
     * Reads the node's compute processes and the GPUs each uses. The list is asked for its length first, then read
     * into room for a few more (processes start meanwhile); INSUFFICIENT_SIZE grows it, at most {@value #MAX_PROCESSES}
     * rows.
     *
     * @return the processes, or the status of the call that failed with no rows
     */
    public static SmiProcesses processes() {
        Memory count = new Memory(8);
        count.setInt(0, 0);
        int rc = RocmSmiBinding.Processes.rsmi_compute_process_info_get(0, Pointer.nativeValue(count));
        if (rc != 0) {
            return new SmiProcesses(rc, List.of());
        }
        int room = Math.min(MAX_PROCESSES, Math.max(1, count.getInt(0)) + 8);
        Memory infos;
        int n;
        while (true) {
            infos = new Memory(room * PROCESS_INFO_SIZE);
            infos.clear();
            count.setInt(0, room);
            rc = RocmSmiBinding.Processes.rsmi_compute_process_info_get(Pointer.nativeValue(infos),
                    Pointer.nativeValue(count));
            n = Math.min(room, Math.max(0, count.getInt(0)));
            if (rc == RsmiStatus.RSMI_STATUS_INSUFFICIENT_SIZE.code() && room < MAX_PROCESSES) {
                room = Math.min(MAX_PROCESSES, room * 2);
                continue;
            }
            if (rc != 0 && rc != RsmiStatus.RSMI_STATUS_INSUFFICIENT_SIZE.code()) {
                return new SmiProcesses(rc, List.of());
            }
            break;
        }
        List<long[]> out = new ArrayList<>(n);
        Memory gpus = new Memory(4L * MAX_GPUS);
        for (int i = 0; i < n; i++) {
            long pid = Integer.toUnsignedLong(infos.getInt(i * PROCESS_INFO_SIZE));
            long vram = infos.getLong(i * PROCESS_INFO_SIZE + 8);
            count.setInt(0, MAX_GPUS);
            int g = RocmSmiBinding.Processes.rsmi_compute_process_gpus_get((int) pid, Pointer.nativeValue(gpus),
                    Pointer.nativeValue(count));
            int k = g == 0 || g == RsmiStatus.RSMI_STATUS_INSUFFICIENT_SIZE.code()
                    ? Math.min(MAX_GPUS, Math.max(0, count.getInt(0))) : 0;
            long[] row = new long[2 + k];
            row[0] = pid;
            row[1] = vram;
            for (int j = 0; j < k; j++) {
                row[2 + j] = Integer.toUnsignedLong(gpus.getInt(4L * j));
            }
            out.add(row);
        }
        return new SmiProcesses(0, out);
    }

    /**
     * Reads busy %, VRAM used (bytes), temperature (m°C, edge else junction), power (µW) and the energy accumulator
     * (mJ: the counter times its resolution) per device. A device that answers NOT_SUPPORTED for the energy counter is
     * not asked again.
     */
    public static final class Sampler {
        /** Values per device: busy, vram used, millidegrees, microwatts, millijoules. */
        public static final int STRIDE = 5;
        private final int[] devices;
        private final Memory[] blocks;
        private final long[] values;
        private final boolean[] noEnergy;

        /** @param devices ROCm SMI indices, -1 for devices it does not know */
        public Sampler(int[] devices) {
            this.devices = devices.clone();
            this.blocks = new Memory[devices.length];
            for (int i = 0; i < blocks.length; i++) {
                blocks[i] = new Memory(32);
            }
            this.values = new long[devices.length * STRIDE];
            this.noEnergy = new boolean[devices.length];
        }

        /** @return the array {@link #sweep()} fills */
        public long[] values() {
            return values;
        }

        /** Reads every device once; absent values are {@link #ABSENT}. */
        public void sweep() {
            boolean powerGet = RocmSmiBinding.hasPowerGet();
            boolean energy = RocmSmiBinding.hasEnergy();
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
                if (energy && !noEnergy[i]) {
                    int rc = RocmSmiBinding.Energy.rsmi_dev_energy_count_get(dv, a, a + 8, a + 16);
                    if (rc == 0) {
                        values[base + 4] = millijoules(b.getLong(0), b.getFloat(8));
                    } else if (rc == RsmiStatus.RSMI_STATUS_NOT_SUPPORTED.code()) {
                        noEnergy[i] = true;
                    }
                }
            }
        }

        /**
         * @param counter    the accumulator (unsigned)
         * @param resolution µJ per count, as the library reports it
         * @return the counter in whole millijoules, floored; {@link #ABSENT} for a resolution that is not a positive
         *         finite number or a product past 2^63
         */
        static long millijoules(long counter, float resolution) {
            if (!(resolution > 0) || Float.isInfinite(resolution)) {
                return ABSENT;
            }
            double mj = (counter >= 0 ? counter : counter + 0x1p64) * (double) resolution / 1000.0;
            return mj < 0x1p63 ? (long) Math.floor(mj) : ABSENT;
        }
    }
}
