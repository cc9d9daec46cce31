package io.gpusched.nvml;

import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.nvml.internal.NvmlReturn;
import io.gpusched.nvml.internal.NvmlSession;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

/**
 * Turns what NVML answered about one device's processes into a {@link ProcessUsageSample}: pure Java, so the rules
 * are tested without a library. The rules:
 * <ul>
 *   <li>A process's SM utilization is the mean of its samples newer than the previous read (NVML returns a sample per
 *       process and driver sample period only for processes that were busy in it); a process listed without a sample
 *       read 0 % over the period, as does every process when the driver had no new sample (NOT_FOUND). Values past
 *       100 are read as 100.</li>
 *   <li>A process's memory is its {@code usedGpuMemory} from the running-process list; where the driver reports
 *       {@code NVML_VALUE_NOT_AVAILABLE} for every process listed, memory is not measured, and says so.</li>
 *   <li>The processes are those of the running list, then any that only the utilization samples name (graphics
 *       processes, or every process when the list could not be read). Pids outside 1 to 2<sup>31</sup>-1 are
 *       dropped: the kernel gives none.</li>
 * </ul>
 */
final class NvmlProcessUsage {
    /** What a device answered for per-process memory when it answers NVML_VALUE_NOT_AVAILABLE for every process. */
    static final String MEMORY_NOT_AVAILABLE = "the driver reports no per-process memory on this device"
            + " (usedGpuMemory is NVML_VALUE_NOT_AVAILABLE)";

    private NvmlProcessUsage() {
    }

    /**
     * @param takenAt    when it was read
     * @param running    {pid, used bytes (-1: not reported), ...} per running process, or null when the list could
     *                   not be read ({@code memoryWhyNot} says why)
     * @param memoryWhyNot why memory is not measured, or null
     * @param samples    {pid, timestamp µs, SM %} per sample newer than the previous read (empty: none), or null when
     *                   utilization is not measured ({@code utilWhyNot} says why)
     * @param utilWhyNot why utilization is not measured, or null
     */
    static ProcessUsageSample combine(Instant takenAt, List<long[]> running, String memoryWhyNot,
            List<long[]> samples, String utilWhyNot) {
        Map<Integer, long[]> memory = new LinkedHashMap<>();
        boolean anyMemory = false;
        if (running != null) {
            for (long[] p : running) {
                if (!validPid(p[0])) {
                    continue;
                }
                long[] m = memory.computeIfAbsent((int) p[0], k -> new long[]{-1});
                if (p[1] >= 0) {
                    m[0] = Math.max(0, m[0]) + p[1];
                    anyMemory = true;
                }
            }
        }
        String memWhy = memoryWhyNot;
        if (memWhy == null && !memory.isEmpty() && !anyMemory) {
            memWhy = MEMORY_NOT_AVAILABLE;
        }
        Map<Integer, double[]> util = new LinkedHashMap<>(); // pid -> {sum, count}
        if (samples != null && utilWhyNot == null) {
            for (long[] s : samples) {
                if (!validPid(s[0])) {
                    continue;
                }
                double[] acc = util.computeIfAbsent((int) s[0], k -> new double[2]);
                acc[0] += Math.min(100, Math.max(0, s[2]));
                acc[1]++;
            }
        }
        boolean utilMeasured = samples != null && utilWhyNot == null;
        LinkedHashMap<Integer, Boolean> pids = new LinkedHashMap<>();
        memory.keySet().forEach(p -> pids.put(p, true));
        util.keySet().forEach(p -> pids.putIfAbsent(p, true));
        List<GpuProcessUsage> out = new ArrayList<>(pids.size());
        for (int pid : pids.keySet()) {
            OptionalDouble u = OptionalDouble.empty();
            if (utilMeasured) {
                double[] acc = util.get(pid);
                u = OptionalDouble.of(acc == null ? 0.0 : acc[0] / acc[1]);
            }
            Optional<MemorySize> m = Optional.empty();
            long[] mem = memory.get(pid);
            if (memWhy == null && mem != null && mem[0] >= 0) {
                m = Optional.of(MemorySize.ofBytes(mem[0]));
            }
            out.add(new GpuProcessUsage(pid, u, m));
        }
        String utilWhy = utilWhyNot != null ? utilWhyNot
                : samples == null ? "per-process utilization was not read" : null;
        return new ProcessUsageSample(takenAt, out, Optional.ofNullable(utilWhy), Optional.ofNullable(memWhy));
    }

    /**
     * @param now     when it was read
     * @param mig     whether the device is a MIG device (utilization is then not read)
     * @param running what {@code nvmlDeviceGetComputeRunningProcesses_v3} answered
     * @param samples what {@code nvmlDeviceGetProcessUtilization} answered (null on a MIG device)
     * @param seen    the last-seen timestamp it was asked with: older samples are dropped (they would count twice)
     * @return the sample
     */
    static ProcessUsageSample assemble(Instant now, boolean mig, NvmlSession.ProcessList running,
            NvmlSession.ProcessList samples, long seen) {
        String memWhy = running.code() == 0 ? null : whyNot("nvmlDeviceGetComputeRunningProcesses_v3",
                running.code());
        String utilWhy = mig ? NvmlInventory.MIG_UTILIZATION
                : samples.code() == 0 || samples.code() == NvmlReturn.ERROR_NOT_FOUND.code() ? null
                : whyNot("nvmlDeviceGetProcessUtilization", samples.code());
        List<long[]> fresh = null;
        if (utilWhy == null) {
            fresh = new ArrayList<>();
            for (long[] s : samples.processes()) {
                if (Long.compareUnsigned(s[1], seen) > 0) {
                    fresh.add(s);
                }
            }
        }
        return combine(now, running.code() == 0 ? running.processes() : null, memWhy, fresh, utilWhy);
    }

    /** @return why a call's figure is not measured: NVML's answer, or that the driver lacks the call */
    static String whyNot(String call, int code) {
        if (code == NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code()) {
            return "this driver's NVML has no " + call;
        }
        return call + ": " + NvmlReturn.describe(code);
    }

    /** @return the newest timestamp of {@code samples} past {@code lastSeen}, or {@code lastSeen} */
    static long newest(List<long[]> samples, long lastSeen) {
        long max = lastSeen;
        for (long[] s : samples) {
            if (Long.compareUnsigned(s[1], max) > 0) {
                max = s[1];
            }
        }
        return max;
    }

    private static boolean validPid(long pid) {
        return pid >= 1 && pid <= Integer.MAX_VALUE;
    }
}
