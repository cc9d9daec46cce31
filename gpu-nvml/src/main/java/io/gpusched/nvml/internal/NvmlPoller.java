package io.gpusched.nvml.internal;

import com.sun.jna.Memory;
import io.gpusched.nvml.internal.NvmlBinding.Fn;

/**
 * Reads utilization, memory used, temperature, power and the total-energy counter of a fixed set of devices into a
 * {@code long[]}, reusing one native block per device: no allocation per sweep. A handle of 0 (a device that could not
 * be reached at discovery) is skipped. A device that answers NOT_SUPPORTED for the energy counter (GPUs before Volta,
 * MIG devices, many vGPUs) is not asked again. Not thread-safe; callers serialize. Internal.
 */
public final class NvmlPoller {
    /**
     * Values per device in {@link #values()}: status, utilization %, memory used bytes, temperature, power mW, energy
     * counter mJ.
     */
    public static final int STRIDE = 6;
    /** Marker for a value not reported. */
    public static final long ABSENT = Long.MIN_VALUE;
    /** The calls of a sweep, as {@link #failedCall(int)} names them. */
    static final String[] CALLS = {"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo_v2",
        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEnergyConsumption"};

    private final long[] handles;
    private final Memory[] blocks;
    private final long[] blockAddr;
    private final long[] values;
    private final int[] failed;
    private final int[] live;
    private final boolean[] noEnergy;
    private final boolean memV2;
    private final boolean mem;
    private final boolean util;
    private final boolean temp;
    private final boolean power;
    private final boolean energy;

    /**
     * @param session the open session whose library is read
     * @param handles device handles, in the order values are laid out; 0 for a device to skip
     */
    public NvmlPoller(NvmlSession session, long[] handles) {
        NvmlBinding nvml = session.binding();
        this.memV2 = nvml.has(Fn.MEMORY_V2);
        this.mem = nvml.has(Fn.MEMORY);
        this.util = nvml.has(Fn.UTILIZATION);
        this.temp = nvml.has(Fn.TEMPERATURE);
        this.power = nvml.has(Fn.POWER);
        this.energy = nvml.has(Fn.ENERGY);
        this.handles = handles.clone();
        this.blocks = new Memory[handles.length];
        this.blockAddr = new long[handles.length];
        for (int i = 0; i < handles.length; i++) {
            blocks[i] = new Memory(64);
            blockAddr[i] = NvmlSession.addr(blocks[i]);
        }
        this.values = new long[handles.length * STRIDE];
        this.failed = new int[handles.length];
        this.live = new int[handles.length];
        this.noEnergy = new boolean[handles.length];
    }

    /** @return the array {@link #sweep()} fills: per device, {@link #STRIDE} longs */
    public long[] values() {
        return values;
    }

    /** @return the call that set device {@code i}'s status in the last read of it, or null when none failed */
    public String failedCall(int i) {
        return failed[i] < 0 ? null : CALLS[failed[i]];
    }

    /** @return how many live metric calls (utilization, memory, temperature) device {@code i} answered */
    public int liveAnswers(int i) {
        return live[i];
    }

    /**
     * Reads every device once. Slot 0 of a device is 0, or the NVML code of the first failing call
     * ({@code 15}: the GPU is lost). Values a device does not report are {@link #ABSENT}.
     */
    public void sweep() {
        for (int i = 0; i < handles.length; i++) {
            sweepOne(i);
        }
    }

    private int seen(int i, int call, int rc, int status) {
        if (rc == 0 || NvmlSession.benign(rc) || status != 0) {
            return status;
        }
        failed[i] = call;
        return rc;
    }

    /** Reads device {@code i} alone: the live check that recovery and loss probes use. */
    public void sweepOne(int i) {
        long h = handles[i];
        long a = blockAddr[i];
        Memory m = blocks[i];
        int base = i * STRIDE;
        int status = 0;
        int answers = 0;
        failed[i] = -1;
        long u = ABSENT;
        long used = ABSENT;
        long t = ABSENT;
        long p = ABSENT;
        long e = ABSENT;
        if (h != 0) {
            if (util) {
                int rc = NvmlBinding.Utilization.nvmlDeviceGetUtilizationRates(h, a);
                if (rc == 0) {
                    u = m.getInt(NvmlLayout.UTILIZATION_GPU) & 0xFFFFFFFFL;
                    answers++;
                }
                status = seen(i, 0, rc, status);
            }
            if (memV2) {
                m.setInt(NvmlLayout.MEMORY_V2_VERSION_FIELD, NvmlLayout.MEMORY_V2_VERSION);
                int rc = NvmlBinding.MemoryV2.nvmlDeviceGetMemoryInfo_v2(h, a);
                if (rc == 0) {
                    used = m.getLong(NvmlLayout.MEMORY_V2_USED);
                    answers++;
                } else if (rc != NvmlReturn.ERROR_ARGUMENT_VERSION_MISMATCH.code()) {
                    status = seen(i, 1, rc, status);
                }
            }
            if (used == ABSENT && mem) {
                int rc = NvmlBinding.Memory.nvmlDeviceGetMemoryInfo(h, a);
                if (rc == 0) {
                    used = m.getLong(NvmlLayout.MEMORY_USED);
                    answers++;
                }
                status = seen(i, 2, rc, status);
            }
            if (temp) {
                int rc = NvmlBinding.Temperature.nvmlDeviceGetTemperature(h, NvmlLayout.TEMPERATURE_GPU, a);
                if (rc == 0) {
                    t = m.getInt(0) & 0xFFFFFFFFL;
                    answers++;
                }
                status = seen(i, 3, rc, status);
            }
            if (power) {
                int rc = NvmlBinding.Power.nvmlDeviceGetPowerUsage(h, a);
                if (rc == 0) {
                    p = m.getInt(0) & 0xFFFFFFFFL;
                }
                status = seen(i, 4, rc, status);
            }
            if (energy && !noEnergy[i]) {
                int rc = NvmlBinding.Energy.nvmlDeviceGetTotalEnergyConsumption(h, a);
                if (rc == 0) {
                    e = m.getLong(0);
                    e = e < 0 ? ABSENT : e; // past 2^63 mJ is no counter a GPU reaches: garbage
                } else if (NvmlSession.benign(rc)) {
                    noEnergy[i] = true;
                }
                status = seen(i, 5, rc, status);
            }
        }
        live[i] = answers;
        values[base] = status;
        values[base + 1] = u;
        values[base + 2] = used;
        values[base + 3] = t;
        values[base + 4] = p;
        values[base + 5] = e;
    }
}
