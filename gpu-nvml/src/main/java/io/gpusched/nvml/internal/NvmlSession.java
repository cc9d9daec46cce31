package io.gpusched.nvml.internal;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import io.gpusched.nvml.internal.NvmlBinding.Fn;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One {@code nvmlInit_v2} .. {@code nvmlShutdown} span and the calls made in it. Discovery returns plain values and,
 * per device, the first call that failed; {@link NvmlPoller} reads live values into a primitive array without
 * allocating, and {@link NvmlEventWatch} waits for XID events. A code other than success or NOT_SUPPORTED from a
 * call about one device is a {@link Fault} of that device, never an exception out of discovery. Internal.
 *
 * <p>Why it is over 500 lines: discovery is one careful reader per NVML query (each records the first failing call of
 * its device and stops asking a lost GPU); the live paths ({@link NvmlPoller}, {@link NvmlEventWatch}) are apart.
 */
public final class NvmlSession implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlSession.class);

    /** An NVML call failed. Internal: the inventory turns it into a device's health or a typed public error. */
    public static final class NvmlCallException extends RuntimeException {
        private final String call;
        private final int code;

        NvmlCallException(String call, int code) {
            super(call + " failed: " + NvmlReturn.describe(code));
            this.call = call;
            this.code = code;
        }

        /** @return the NVML return code */
        public int code() {
            return code;
        }

        /** @return the symbol that failed */
        public String call() {
            return call;
        }

        /** @return the failure as a device fault */
        public Fault fault() {
            return new Fault(call, code);
        }
    }

    /**
     * A call about one device answered an error other than "not supported": evidence that the device is failing.
     *
     * @param call the NVML symbol
     * @param code what it answered
     */
    public record Fault(String call, int code) {
        /** @return true for {@code GPU_IS_LOST} */
        public boolean lost() {
            return code == NvmlReturn.ERROR_GPU_IS_LOST.code();
        }

        /** @return true when further calls to the device are pointless or slow (lost, timed out) */
        boolean stopsQueries() {
            return lost() || code == NvmlReturn.ERROR_TIMEOUT.code();
        }

        /** @return {@code "nvmlDeviceGetSerial: NVML 999: An internal driver error occurred"} */
        public String describe() {
            return call + ": " + NvmlReturn.describe(code);
        }
    }

    /**
     * What discovery reads of one device (a GPU, or a MIG device of one). Fields a failing call could not read are
     * absent.
     *
     * @param handle            NVML device handle; 0 when even the handle could not be read
     * @param nvmlIndex         NVML index of the GPU (of the parent for a MIG device)
     * @param migSlot           for a MIG device, its slot under the parent; -1 for a whole GPU
     * @param uuid              UUID; empty when unreadable
     * @param name              product name, where read
     * @param serial            serial number
     * @param memoryTotal       total memory in bytes, where read
     * @param ccMajor           compute capability major, or -1
     * @param ccMinor           compute capability minor, or -1
     * @param pciBusId          bus id as NVML prints it, where read
     * @param minor             /dev/nvidiaN minor (the parent's for a MIG device)
     * @param persistence       persistence mode, where known
     * @param migEnabled        MIG mode of the GPU
     * @param parentUuid        for MIG devices, the parent's UUID
     * @param gpuInstanceId     MIG GPU instance id, or -1
     * @param computeInstanceId MIG compute instance id, or -1
     * @param fault             the first call about this device that failed, if one did
     * @param pinnedBecause     why the device may never be handed out in this session (identity or MIG layout
     *                          unreadable), if so
     */
    public record RawDevice(long handle, int nvmlIndex, int migSlot, Optional<String> uuid, Optional<String> name,
            Optional<String> serial, OptionalLong memoryTotal, int ccMajor, int ccMinor,
            Optional<String> pciBusId, OptionalInt minor, Optional<Boolean> persistence,
            boolean migEnabled, Optional<String> parentUuid, int gpuInstanceId,
            int computeInstanceId, Optional<Fault> fault, Optional<String> pinnedBecause) {
    }

    /**
     * What discovery found.
     *
     * @param devices    the devices, GPUs in NVML order with MIG devices in place of a MIG-enabled GPU
     * @param gpuHandles per NVML index, the GPU's handle (0 where unreadable)
     * @param gpuFaults  per NVML index, the first fault of the GPU itself (null where none)
     */
    public record Discovery(List<RawDevice> devices, long[] gpuHandles, Fault[] gpuFaults) {
        /** @return the number of physical GPUs */
        public int gpuCount() {
            return gpuHandles.length;
        }
    }

    /**
     * The answer of a call reading one int.
     *
     * @param code  NVML's code
     * @param value the value when {@code code} is 0
     */
    public record IntAnswer(int code, int value) {
    }

    /**
     * The active NVLinks of a GPU.
     *
     * @param peers for each active link, the remote PCI bus id, or {@code "NVSWITCH"}
     * @param fault the first failing call, if one failed
     */
    public record Links(List<String> peers, Optional<Fault> fault) {
    }

    private final NvmlBinding nvml;
    private final Memory scratch = new Memory(256);
    private final Memory pci = new Memory(NvmlLayout.PCI_SIZE);
    private boolean open;

    private NvmlSession(NvmlBinding nvml) {
        this.nvml = nvml;
    }

    /**
     * Binds the library and initializes NVML.
     *
     * @throws NvmlBinding.NvmlLoadException when the library cannot be loaded
     * @throws NvmlCallException             when {@code nvmlInit_v2} fails (code 9: no driver)
     */
    public static NvmlSession open(Optional<Path> library) {
        NvmlBinding b = NvmlBinding.acquire(library);
        int rc;
        try {
            rc = NvmlBinding.Core.nvmlInit_v2();
        } catch (Error e) {
            NvmlBinding.release();
            throw e;
        }
        if (rc != 0) {
            NvmlBinding.release();
            throw new NvmlCallException("nvmlInit_v2", rc);
        }
        NvmlSession s = new NvmlSession(b);
        s.open = true;
        return s;
    }

    /** @return the binding */
    public NvmlBinding binding() {
        return nvml;
    }

    static long addr(Pointer p) {
        return Pointer.nativeValue(p);
    }

    static void check(String call, int rc) {
        if (rc != 0) {
            throw new NvmlCallException(call, rc);
        }
    }

    /** @return the number of GPUs */
    public synchronized int deviceCount() {
        check("nvmlDeviceGetCount_v2", NvmlBinding.Core.nvmlDeviceGetCount_v2(addr(scratch)));
        return scratch.getInt(0);
    }

    /** @return the driver version, where the library reports it */
    public synchronized Optional<String> driverVersion() {
        if (!nvml.has(Fn.DRIVER_VERSION)) {
            return Optional.empty();
        }
        int rc = NvmlBinding.DriverVersion.nvmlSystemGetDriverVersion(addr(scratch), NvmlLayout.STRING_BUFFER);
        if (rc != 0) {
            LOG.debug("nvmlSystemGetDriverVersion: {}", NvmlReturn.describe(rc));
        }
        return rc == 0 ? Optional.of(cString(scratch)) : Optional.empty();
    }

    /** @return the driver's CUDA version as 1000 x major + 10 x minor, where reported */
    public synchronized OptionalInt cudaDriverVersion() {
        if (!nvml.has(Fn.CUDA_DRIVER_VERSION)) {
            return OptionalInt.empty();
        }
        int rc = NvmlBinding.CudaDriverVersion.nvmlSystemGetCudaDriverVersion(addr(scratch));
        if (rc != 0) {
            LOG.debug("nvmlSystemGetCudaDriverVersion: {}", NvmlReturn.describe(rc));
        }
        return rc == 0 ? OptionalInt.of(scratch.getInt(0)) : OptionalInt.empty();
    }

    private static String cString(Memory m) {
        return m.getString(0, StandardCharsets.UTF_8.name());
    }

    /** @return true for a code that only says "this device does not have that": not a fault */
    public static boolean benign(int rc) {
        return rc == NvmlReturn.ERROR_NOT_SUPPORTED.code();
    }

    /** The calls about one device during discovery: records the first fault; stops once the device is gone. */
    private static final class Reader {
        Fault fault;

        boolean stopped() {
            return fault != null && fault.stopsQueries();
        }

        /** @return rc; a code other than success (and NOT_SUPPORTED where not required) is recorded as a fault */
        int saw(String call, int rc, boolean required) {
            if (rc != 0 && (required || !benign(rc)) && fault == null) {
                fault = new Fault(call, rc);
            }
            return rc;
        }
    }

    private Optional<String> string(Fn fn, long device, Reader r, boolean required) {
        if (r.stopped()) {
            return Optional.empty();
        }
        String call = switch (fn) {
            case UUID -> "nvmlDeviceGetUUID";
            case NAME -> "nvmlDeviceGetName";
            case SERIAL -> "nvmlDeviceGetSerial";
            default -> throw new IllegalArgumentException(fn.name());
        };
        if (!nvml.has(fn)) {
            if (required) {
                r.saw(call, NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(), true);
            }
            return Optional.empty();
        }
        scratch.setByte(0, (byte) 0);
        int rc = switch (fn) {
            case UUID -> NvmlBinding.Uuid.nvmlDeviceGetUUID(device, addr(scratch), NvmlLayout.STRING_BUFFER);
            case NAME -> NvmlBinding.Name.nvmlDeviceGetName(device, addr(scratch), NvmlLayout.STRING_BUFFER);
            default -> NvmlBinding.Serial.nvmlDeviceGetSerial(device, addr(scratch), NvmlLayout.STRING_BUFFER);
        };
        if (r.saw(call, rc, required) != 0) {
            return Optional.empty();
        }
        String v = cString(scratch);
        if (v.isBlank()) {
            if (required) {
                r.saw(call + " (blank answer)", NvmlReturn.ERROR_UNKNOWN.code(), true);
            }
            return Optional.empty();
        }
        return Optional.of(v);
    }

    private OptionalInt uintOut(Fn fn, long device, Reader r, boolean required) {
        if (r.stopped()) {
            return OptionalInt.empty();
        }
        String call = switch (fn) {
            case MINOR -> "nvmlDeviceGetMinorNumber";
            case PERSISTENCE -> "nvmlDeviceGetPersistenceMode";
            case MIG_COUNT -> "nvmlDeviceGetMaxMigDeviceCount";
            case GPU_INSTANCE_ID -> "nvmlDeviceGetGpuInstanceId";
            case COMPUTE_INSTANCE_ID -> "nvmlDeviceGetComputeInstanceId";
            default -> throw new IllegalArgumentException(fn.name());
        };
        if (!nvml.has(fn)) {
            if (required) {
                r.saw(call, NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(), true);
            }
            return OptionalInt.empty();
        }
        scratch.setInt(0, 0);
        int rc = switch (fn) {
            case MINOR -> NvmlBinding.Minor.nvmlDeviceGetMinorNumber(device, addr(scratch));
            case PERSISTENCE -> NvmlBinding.Persistence.nvmlDeviceGetPersistenceMode(device, addr(scratch));
            case MIG_COUNT -> NvmlBinding.MigCount.nvmlDeviceGetMaxMigDeviceCount(device, addr(scratch));
            case GPU_INSTANCE_ID -> NvmlBinding.GpuInstanceId.nvmlDeviceGetGpuInstanceId(device, addr(scratch));
            default -> NvmlBinding.ComputeInstanceId.nvmlDeviceGetComputeInstanceId(device, addr(scratch));
        };
        return r.saw(call, rc, required) == 0 ? OptionalInt.of(scratch.getInt(0)) : OptionalInt.empty();
    }

    private OptionalLong memoryTotal(long device, Reader r) {
        if (r.stopped()) {
            return OptionalLong.empty();
        }
        if (nvml.has(Fn.MEMORY_V2)) {
            scratch.clear(NvmlLayout.MEMORY_V2_SIZE);
            scratch.setInt(NvmlLayout.MEMORY_V2_VERSION_FIELD, NvmlLayout.MEMORY_V2_VERSION);
            int rc = NvmlBinding.MemoryV2.nvmlDeviceGetMemoryInfo_v2(device, addr(scratch));
            if (rc == 0) {
                return OptionalLong.of(scratch.getLong(NvmlLayout.MEMORY_V2_TOTAL));
            }
            if (rc != NvmlReturn.ERROR_ARGUMENT_VERSION_MISMATCH.code()) {
                r.saw("nvmlDeviceGetMemoryInfo_v2", rc, false);
            }
            if (r.stopped()) {
                return OptionalLong.empty();
            }
        }
        if (nvml.has(Fn.MEMORY) && r.saw("nvmlDeviceGetMemoryInfo",
                NvmlBinding.Memory.nvmlDeviceGetMemoryInfo(device, addr(scratch)), false) == 0) {
            return OptionalLong.of(scratch.getLong(NvmlLayout.MEMORY_TOTAL));
        }
        return OptionalLong.empty();
    }

    /** @return the PCI bus id of a device ({@code "00000000:06:00.0"}), or empty */
    private Optional<String> pciBusId(long device, Reader r) {
        if (r.stopped() || !nvml.has(Fn.PCI) || r.saw("nvmlDeviceGetPciInfo_v3",
                NvmlBinding.Pci.nvmlDeviceGetPciInfo_v3(device, addr(pci)), false) != 0) {
            return Optional.empty();
        }
        return Optional.of(pci.getString(NvmlLayout.PCI_BUS_ID, StandardCharsets.US_ASCII.name()));
    }

    /**
     * Reads every GPU and, where MIG is on, its MIG devices instead of it. A GPU whose calls fail is still listed,
     * with its first fault: without a handle or UUID it has no identity; where its MIG mode, MIG device count or a
     * MIG handle could not be read it is listed whole, beside the MIG devices that were read. Both are pinned.
     * After {@code GPU_IS_LOST} or {@code TIMEOUT} a device is asked nothing more.
     *
     * @throws NvmlCallException only when the device count itself cannot be read
     */
    public synchronized Discovery discover() {
        int n = deviceCount();
        List<RawDevice> out = new ArrayList<>();
        long[] gpuHandles = new long[n];
        Fault[] gpuFaults = new Fault[n];
        for (int i = 0; i < n; i++) {
            int hrc = NvmlBinding.Core.nvmlDeviceGetHandleByIndex_v2(i, addr(scratch));
            if (hrc != 0) {
                Fault f = new Fault("nvmlDeviceGetHandleByIndex_v2", hrc);
                gpuFaults[i] = f;
                out.add(unidentified(0, i, -1, Optional.empty(), f));
                continue;
            }
            long h = scratch.getLong(0);
            gpuHandles[i] = h;
            Reader r = new Reader();
            Optional<String> uuid = string(Fn.UUID, h, r, true);
            if (uuid.isEmpty()) {
                gpuFaults[i] = r.fault;
                out.add(unidentified(h, i, -1, Optional.empty(), r.fault));
                continue;
            }
            boolean mig = false;
            boolean migKnown = !nvml.has(Fn.MIG_MODE);
            if (!migKnown) {
                int rc = r.saw("nvmlDeviceGetMigMode",
                        NvmlBinding.MigMode.nvmlDeviceGetMigMode(h, addr(scratch), addr(scratch) + 4), false);
                migKnown = rc == 0 || benign(rc);
                mig = rc == 0 && scratch.getInt(0) == 1;
            }
            Optional<String> name = string(Fn.NAME, h, r, false);
            int major = -1;
            int minorCc = -1;
            if (!r.stopped() && nvml.has(Fn.COMPUTE_CAPABILITY) && r.saw("nvmlDeviceGetCudaComputeCapability",
                    NvmlBinding.ComputeCapability.nvmlDeviceGetCudaComputeCapability(h, addr(scratch),
                            addr(scratch) + 4),
                    false) == 0) {
                major = scratch.getInt(0);
                minorCc = scratch.getInt(4);
            }
            Optional<String> bus = pciBusId(h, r);
            OptionalInt minor = uintOut(Fn.MINOR, h, r, false);
            OptionalInt persistence = uintOut(Fn.PERSISTENCE, h, r, false);
            Optional<Boolean> persist = persistence.isPresent() ? Optional.of(persistence.getAsInt() == 1)
                    : Optional.empty();
            Optional<String> serial = string(Fn.SERIAL, h, r, false);
            OptionalLong memory = memoryTotal(h, r);
            List<RawDevice> children = new ArrayList<>();
            Fault layoutFault = migKnown ? null : r.fault;
            if (mig && !r.stopped()) {
                Reader layout = new Reader();
                if (!nvml.has(Fn.MIG_HANDLE)) {
                    layout.saw("nvmlDeviceGetMigDeviceHandleByIndex", NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(),
                            true);
                }
                int max = layout.fault == null ? uintOut(Fn.MIG_COUNT, h, layout, true).orElse(0) : 0;
                for (int m = 0; m < max && !layout.stopped(); m++) {
                    int rc = NvmlBinding.MigHandle.nvmlDeviceGetMigDeviceHandleByIndex(h, m, addr(scratch));
                    if (rc == NvmlReturn.ERROR_NOT_FOUND.code() || rc == NvmlReturn.ERROR_INVALID_ARGUMENT.code()) {
                        continue; // no MIG device in this slot
                    }
                    if (layout.saw("nvmlDeviceGetMigDeviceHandleByIndex", rc, true) != 0) {
                        continue;
                    }
                    long mh = scratch.getLong(0);
                    Reader c = new Reader();
                    Optional<String> migUuid = string(Fn.UUID, mh, c, true);
                    if (migUuid.isEmpty()) {
                        children.add(unidentified(mh, i, m, uuid, c.fault));
                        continue;
                    }
                    Optional<String> migName = string(Fn.NAME, mh, c, false);
                    OptionalLong migMemory = memoryTotal(mh, c);
                    int gi = uintOut(Fn.GPU_INSTANCE_ID, mh, c, false).orElse(-1);
                    int ci = uintOut(Fn.COMPUTE_INSTANCE_ID, mh, c, false).orElse(-1);
                    children.add(new RawDevice(mh, i, m, migUuid, migName.or(() -> name), serial, migMemory, major,
                            minorCc, bus, minor, persist, true, uuid, gi, ci, Optional.ofNullable(c.fault),
                            Optional.empty()));
                }
                layoutFault = layout.fault;
            }
            Fault first = r.fault != null ? r.fault : layoutFault;
            gpuFaults[i] = first;
            if (!mig || layoutFault != null) {
                out.add(new RawDevice(h, i, -1, uuid, name, serial, memory, major, minorCc, bus, minor, persist, mig,
                        Optional.empty(), -1, -1, Optional.ofNullable(first),
                        layoutFault == null ? Optional.empty() : Optional.of("MIG layout unreadable")));
            }
            out.addAll(children);
        }
        return new Discovery(out, gpuHandles, gpuFaults);
    }

    private static RawDevice unidentified(long handle, int index, int migSlot, Optional<String> parent, Fault f) {
        return new RawDevice(handle, index, migSlot, Optional.empty(), Optional.empty(), Optional.empty(),
                OptionalLong.empty(), -1, -1, Optional.empty(), OptionalInt.empty(), Optional.empty(), migSlot >= 0,
                parent, -1, -1, Optional.of(f), Optional.of("identity unreadable"));
    }

    /** @return NVML's topology level between two GPUs (0, 10, .. 50) with code 0, or the failing code */
    public synchronized IntAnswer commonAncestor(long a, long b) {
        if (!nvml.has(Fn.TOPOLOGY)) {
            return new IntAnswer(NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(), 0);
        }
        int rc = NvmlBinding.Topology.nvmlDeviceGetTopologyCommonAncestor(a, b, addr(scratch));
        return new IntAnswer(rc, rc == 0 ? scratch.getInt(0) : 0);
    }

    /**
     * The active NVLinks of a GPU: for each, the remote PCI bus id, or {@code "NVSWITCH"} for a link into a switch.
     * NOT_SUPPORTED and INVALID_ARGUMENT from the link state end the list (no such link); other codes are faults.
     */
    public synchronized Links nvLinkPeers(long device) {
        List<String> peers = new ArrayList<>();
        if (!nvml.has(Fn.NVLINK_STATE)) {
            return new Links(peers, Optional.empty());
        }
        Reader r = new Reader();
        for (int link = 0; link < NvmlLayout.NVLINK_MAX_LINKS && !r.stopped(); link++) {
            int rc = NvmlBinding.NvLinkState.nvmlDeviceGetNvLinkState(device, link, addr(scratch));
            if (rc != 0) {
                if (benign(rc) || rc == NvmlReturn.ERROR_INVALID_ARGUMENT.code()) {
                    break;
                }
                r.saw("nvmlDeviceGetNvLinkState", rc, false);
                continue;
            }
            if (scratch.getInt(0) != 1) {
                continue;
            }
            if (nvml.has(Fn.NVLINK_REMOTE_TYPE)) {
                int trc = NvmlBinding.NvLinkRemoteType.nvmlDeviceGetNvLinkRemoteDeviceType(device, link, addr(scratch));
                if (trc == 0 && scratch.getInt(0) == NvmlLayout.NVLINK_DEVICE_TYPE_SWITCH) {
                    peers.add("NVSWITCH");
                    continue;
                }
                if (trc != NvmlReturn.ERROR_INVALID_ARGUMENT.code()) {
                    r.saw("nvmlDeviceGetNvLinkRemoteDeviceType", trc, false);
                }
            }
            if (nvml.has(Fn.NVLINK_REMOTE_PCI) && !r.stopped()) {
                int prc = NvmlBinding.NvLinkRemotePci.nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, addr(pci));
                if (prc == 0) {
                    peers.add(pci.getString(NvmlLayout.PCI_BUS_ID, StandardCharsets.US_ASCII.name()));
                } else if (prc != NvmlReturn.ERROR_INVALID_ARGUMENT.code()) {
                    r.saw("nvmlDeviceGetNvLinkRemotePciInfo_v2", prc, false);
                }
            }
        }
        return new Links(peers, Optional.ofNullable(r.fault));
    }

    /**
     * Lists the compute processes of a device, growing the buffer when NVML answers INSUFFICIENT_SIZE.
     *
     * @return pid and used bytes (-1 when not reported) pairs, or empty when the call is not available
     * @throws NvmlCallException when the call fails (the caller turns it into the device's health)
     */
    public synchronized Optional<List<long[]>> processes(long device) {
        ProcessList l = runningProcesses(device);
        if (l.code() == NvmlReturn.ERROR_NO_PERMISSION.code()) {
            throw new NvmlCallException("nvmlDeviceGetComputeRunningProcesses_v3", l.code());
        }
        return l.code() == 0 ? Optional.of(l.processes()) : Optional.empty();
    }

    /**
     * The answer of a call listing one device's processes or their samples.
     *
     * @param code      0, or why there is no list: NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND (the symbol is
     *                  absent from this driver), NOT_FOUND (no samples newer than the last seen)
     * @param processes for running processes {pid, used bytes (-1: not reported), GPU instance, compute instance};
     *                  for utilization samples {pid, timestamp µs, SM %}
     */
    public record ProcessList(int code, List<long[]> processes) {
    }

    private Memory processBuffer = new Memory(16L * NvmlLayout.PROCESS_SIZE);
    private Memory sampleBuffer = new Memory(32L * NvmlLayout.PROCESS_UTIL_SIZE);

    /**
     * Lists the compute processes of a device ({@code nvmlDeviceGetComputeRunningProcesses_v3}), growing the buffer
     * while NVML answers INSUFFICIENT_SIZE.
     *
     * @throws NvmlCallException for a code other than success, NOT_SUPPORTED and NO_PERMISSION
     */
    public synchronized ProcessList runningProcesses(long device) {
        String call = "nvmlDeviceGetComputeRunningProcesses_v3";
        if (!nvml.has(Fn.PROCESSES)) {
            return new ProcessList(NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(), List.of());
        }
        for (int attempt = 0; attempt < 4; attempt++) {
            int capacity = (int) (processBuffer.size() / NvmlLayout.PROCESS_SIZE);
            scratch.setInt(0, capacity);
            int rc = NvmlBinding.Processes.nvmlDeviceGetComputeRunningProcesses_v3(device, addr(scratch),
                    addr(processBuffer));
            long count = scratch.getInt(0) & 0xFFFFFFFFL;
            if (rc == NvmlReturn.ERROR_INSUFFICIENT_SIZE.code()) {
                processBuffer = new Memory(grown(capacity, count) * NvmlLayout.PROCESS_SIZE);
                continue;
            }
            if (benign(rc) || rc == NvmlReturn.ERROR_NO_PERMISSION.code()) {
                return new ProcessList(rc, List.of());
            }
            if (rc != 0) {
                throw new NvmlCallException(call, rc);
            }
            if (count > capacity) {
                throw new NvmlCallException(call + " (count " + count + " beyond the buffer of " + capacity + ")",
                        NvmlReturn.ERROR_UNKNOWN.code());
            }
            List<long[]> out = new ArrayList<>((int) count);
            for (int i = 0; i < count; i++) {
                long base = (long) i * NvmlLayout.PROCESS_SIZE;
                out.add(new long[]{processBuffer.getInt(base + NvmlLayout.PROCESS_PID) & 0xFFFFFFFFL,
                    processBuffer.getLong(base + NvmlLayout.PROCESS_USED_MEMORY),
                    processBuffer.getInt(base + NvmlLayout.PROCESS_GPU_INSTANCE) & 0xFFFFFFFFL,
                    processBuffer.getInt(base + NvmlLayout.PROCESS_COMPUTE_INSTANCE) & 0xFFFFFFFFL});
            }
            return new ProcessList(0, out);
        }
        throw new NvmlCallException(call + " (the list kept growing)", NvmlReturn.ERROR_INSUFFICIENT_SIZE.code());
    }

    /**
     * Reads the per-process utilization samples the driver recorded after {@code lastSeen}
     * ({@code nvmlDeviceGetProcessUtilization}; one sample per process and driver sample period, for processes with
     * non-zero utilization in it), growing the buffer while NVML answers INSUFFICIENT_SIZE.
     *
     * @param lastSeen the CPU timestamp (µs) of the newest sample already read; 0 for the driver's whole buffer
     * @return the samples, or the code NOT_FOUND (none newer), NOT_SUPPORTED, NO_PERMISSION or FUNCTION_NOT_FOUND
     * @throws NvmlCallException for any other code
     */
    public synchronized ProcessList processUtilization(long device, long lastSeen) {
        String call = "nvmlDeviceGetProcessUtilization";
        if (!nvml.has(Fn.PROCESS_UTILIZATION)) {
            return new ProcessList(NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code(), List.of());
        }
        for (int attempt = 0; attempt < 4; attempt++) {
            int capacity = (int) (sampleBuffer.size() / NvmlLayout.PROCESS_UTIL_SIZE);
            scratch.setInt(0, capacity);
            int rc = NvmlBinding.ProcessUtilization.nvmlDeviceGetProcessUtilization(device, addr(sampleBuffer),
                    addr(scratch), lastSeen);
            long count = scratch.getInt(0) & 0xFFFFFFFFL;
            if (rc == NvmlReturn.ERROR_INSUFFICIENT_SIZE.code()) {
                sampleBuffer = new Memory(grown(capacity, count) * NvmlLayout.PROCESS_UTIL_SIZE);
                continue;
            }
            if (benign(rc) || rc == NvmlReturn.ERROR_NO_PERMISSION.code()
                    || rc == NvmlReturn.ERROR_NOT_FOUND.code()) {
                return new ProcessList(rc, List.of());
            }
            if (rc != 0) {
                throw new NvmlCallException(call, rc);
            }
            if (count > capacity) {
                throw new NvmlCallException(call + " (count " + count + " beyond the buffer of " + capacity + ")",
                        NvmlReturn.ERROR_UNKNOWN.code());
            }
            List<long[]> out = new ArrayList<>((int) count);
            for (int i = 0; i < count; i++) {
                long base = (long) i * NvmlLayout.PROCESS_UTIL_SIZE;
                out.add(new long[]{sampleBuffer.getInt(base + NvmlLayout.PROCESS_UTIL_PID) & 0xFFFFFFFFL,
                    sampleBuffer.getLong(base + NvmlLayout.PROCESS_UTIL_TIMESTAMP),
                    sampleBuffer.getInt(base + NvmlLayout.PROCESS_UTIL_SM) & 0xFFFFFFFFL});
            }
            return new ProcessList(0, out);
        }
        throw new NvmlCallException(call + " (the list kept growing)", NvmlReturn.ERROR_INSUFFICIENT_SIZE.code());
    }

    /** Most entries a process or sample buffer grows to. */
    static final int MAX_ENTRIES = (1 << 16) + 8;

    /** @return a buffer size (entries) past {@code count} and at least double {@code capacity}; at most 65,544 */
    private static long grown(int capacity, long count) {
        return Math.min(MAX_ENTRIES, Math.max(capacity * 2L, Math.min(count, 1 << 16) + 8));
    }

    /** Calls {@code nvmlShutdown} (a failure is logged: nothing more can be done) and releases the binding. */
    @Override
    public synchronized void close() {
        if (open) {
            open = false;
            try {
                int rc = NvmlBinding.Core.nvmlShutdown();
                if (rc != 0) {
                    LOG.debug("nvmlShutdown: {}", NvmlReturn.describe(rc));
                }
            } finally {
                NvmlBinding.release();
            }
        }
    }

    /** @return {@link Native#POINTER_SIZE}, which the binding assumes is 8 */
    public static int pointerSize() {
        return Native.POINTER_SIZE;
    }
}
