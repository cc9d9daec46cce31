package io.gpusched.nvml.internal;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import io.gpusched.nvml.internal.NvmlBinding.Fn;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * One {@code nvmlInit_v2} .. {@code nvmlShutdown} span and the calls made in it. Discovery returns plain values;
 * {@link Poller} reads live values into a primitive array without allocating. Internal.
 */
public final class NvmlSession implements AutoCloseable {

    /** An NVML call failed. */
    public static final class NvmlCallException extends RuntimeException {
        private final int code;

        NvmlCallException(String call, int code) {
            super(call + " failed: " + NvmlReturn.describe(code));
            this.code = code;
        }

        /** @return the NVML return code */
        public int code() {
            return code;
        }
    }

    /**
     * What discovery reads of one device (a GPU, or a MIG device of one).
     *
     * @param handle          NVML device handle
     * @param nvmlIndex       NVML index of the GPU (of the parent for a MIG device)
     * @param uuid            UUID
     * @param name            product name
     * @param serial          serial number
     * @param memoryTotal     total memory in bytes
     * @param ccMajor         compute capability major, or -1
     * @param ccMinor         compute capability minor, or -1
     * @param pciBusId        bus id as NVML prints it
     * @param minor           /dev/nvidiaN minor (the parent's for a MIG device)
     * @param persistence     persistence mode, where known
     * @param migEnabled      MIG mode of the GPU
     * @param parentUuid      for MIG devices, the parent's UUID
     * @param gpuInstanceId   MIG GPU instance id, or -1
     * @param computeInstanceId MIG compute instance id, or -1
     */
    public record RawDevice(long handle, int nvmlIndex, String uuid, String name, Optional<String> serial,
                            long memoryTotal, int ccMajor, int ccMinor, String pciBusId, OptionalInt minor,
                            Optional<Boolean> persistence, boolean migEnabled, Optional<String> parentUuid,
                            int gpuInstanceId, int computeInstanceId) {
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

    private static void check(String call, int rc) {
        if (rc != 0) {
            throw new NvmlCallException(call, rc);
        }
    }

    /** @return the number of GPUs */
    public synchronized int deviceCount() {
        check("nvmlDeviceGetCount_v2", NvmlBinding.Core.nvmlDeviceGetCount_v2(addr(scratch)));
        return scratch.getInt(0);
    }

    /** @return the handle of GPU {@code index} */
    public synchronized long handle(int index) {
        check("nvmlDeviceGetHandleByIndex_v2", NvmlBinding.Core.nvmlDeviceGetHandleByIndex_v2(index, addr(scratch)));
        return scratch.getLong(0);
    }

    /** @return the driver version, where the library reports it */
    public synchronized Optional<String> driverVersion() {
        if (!nvml.has(Fn.DRIVER_VERSION)) {
            return Optional.empty();
        }
        int rc = NvmlBinding.DriverVersion.nvmlSystemGetDriverVersion(addr(scratch), NvmlLayout.STRING_BUFFER);
        return rc == 0 ? Optional.of(cString(scratch)) : Optional.empty();
    }

    /** @return the driver's CUDA version as 1000 x major + 10 x minor, where reported */
    public synchronized OptionalInt cudaDriverVersion() {
        if (!nvml.has(Fn.CUDA_DRIVER_VERSION)) {
            return OptionalInt.empty();
        }
        int rc = NvmlBinding.CudaDriverVersion.nvmlSystemGetCudaDriverVersion(addr(scratch));
        return rc == 0 ? OptionalInt.of(scratch.getInt(0)) : OptionalInt.empty();
    }

    private static String cString(Memory m) {
        return m.getString(0, StandardCharsets.UTF_8.name());
    }

    private Optional<String> string(Fn fn, long device) {
        if (!nvml.has(fn)) {
            return Optional.empty();
        }
        int rc = switch (fn) {
            case UUID -> NvmlBinding.Uuid.nvmlDeviceGetUUID(device, addr(scratch), NvmlLayout.STRING_BUFFER);
            case NAME -> NvmlBinding.Name.nvmlDeviceGetName(device, addr(scratch), NvmlLayout.STRING_BUFFER);
            case SERIAL -> NvmlBinding.Serial.nvmlDeviceGetSerial(device, addr(scratch), NvmlLayout.STRING_BUFFER);
            default -> throw new IllegalArgumentException(fn.name());
        };
        if (rc == NvmlReturn.ERROR_GPU_IS_LOST.code()) {
            throw new NvmlCallException("nvmlDeviceGet" + fn, rc);
        }
        return rc == 0 ? Optional.of(cString(scratch)) : Optional.empty();
    }

    private OptionalInt uintOut(Fn fn, long device) {
        if (!nvml.has(fn)) {
            return OptionalInt.empty();
        }
        scratch.setInt(0, 0);
        int rc = switch (fn) {
            case MINOR -> NvmlBinding.Minor.nvmlDeviceGetMinorNumber(device, addr(scratch));
            case PERSISTENCE -> NvmlBinding.Persistence.nvmlDeviceGetPersistenceMode(device, addr(scratch));
            case MIG_COUNT -> NvmlBinding.MigCount.nvmlDeviceGetMaxMigDeviceCount(device, addr(scratch));
            case GPU_INSTANCE_ID -> NvmlBinding.GpuInstanceId.nvmlDeviceGetGpuInstanceId(device, addr(scratch));
            case COMPUTE_INSTANCE_ID ->
                    NvmlBinding.ComputeInstanceId.nvmlDeviceGetComputeInstanceId(device, addr(scratch));
            default -> throw new IllegalArgumentException(fn.name());
        };
        return rc == 0 ? OptionalInt.of(scratch.getInt(0)) : OptionalInt.empty();
    }

    private OptionalLong memoryTotal(long device) {
        if (nvml.has(Fn.MEMORY_V2)) {
            scratch.clear(NvmlLayout.MEMORY_V2_SIZE);
            scratch.setInt(NvmlLayout.MEMORY_V2_VERSION_FIELD, NvmlLayout.MEMORY_V2_VERSION);
            if (NvmlBinding.MemoryV2.nvmlDeviceGetMemoryInfo_v2(device, addr(scratch)) == 0) {
                return OptionalLong.of(scratch.getLong(NvmlLayout.MEMORY_V2_TOTAL));
            }
        }
        if (nvml.has(Fn.MEMORY) && NvmlBinding.Memory.nvmlDeviceGetMemoryInfo(device, addr(scratch)) == 0) {
            return OptionalLong.of(scratch.getLong(NvmlLayout.MEMORY_TOTAL));
        }
        return OptionalLong.empty();
    }

    /** @return the PCI bus id of a device ({@code "00000000:06:00.0"}), or empty */
    private Optional<String> pciBusId(long device) {
        if (!nvml.has(Fn.PCI) || NvmlBinding.Pci.nvmlDeviceGetPciInfo_v3(device, addr(pci)) != 0) {
            return Optional.empty();
        }
        return Optional.of(pci.getString(NvmlLayout.PCI_BUS_ID, StandardCharsets.US_ASCII.name()));
    }

    /** Reads every GPU and, where MIG is on, its MIG devices instead of it. */
    public synchronized List<RawDevice> discover() {
        int n = deviceCount();
        List<RawDevice> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long h = handle(i);
            String uuid = string(Fn.UUID, h).orElseThrow(() -> new NvmlCallException("nvmlDeviceGetUUID", 3));
            String name = string(Fn.NAME, h).orElse("NVIDIA GPU");
            int major = -1;
            int minorCc = -1;
            if (nvml.has(Fn.COMPUTE_CAPABILITY) && NvmlBinding.ComputeCapability.nvmlDeviceGetCudaComputeCapability(
                    h, addr(scratch), addr(scratch) + 4) == 0) {
                major = scratch.getInt(0);
                minorCc = scratch.getInt(4);
            }
            String bus = pciBusId(h).orElse("unknown-" + i);
            OptionalInt minor = uintOut(Fn.MINOR, h);
            OptionalInt persistence = uintOut(Fn.PERSISTENCE, h);
            Optional<Boolean> persist = persistence.isPresent() ? Optional.of(persistence.getAsInt() == 1)
                    : Optional.empty();
            boolean mig = false;
            if (nvml.has(Fn.MIG_MODE)
                    && NvmlBinding.MigMode.nvmlDeviceGetMigMode(h, addr(scratch), addr(scratch) + 4) == 0) {
                mig = scratch.getInt(0) == 1;
            }
            Optional<String> serial = string(Fn.SERIAL, h);
            RawDevice gpu = new RawDevice(h, i, uuid, name, serial, memoryTotal(h).orElse(0), major, minorCc, bus,
                    minor, persist, mig, Optional.empty(), -1, -1);
            if (!mig || !nvml.has(Fn.MIG_HANDLE)) {
                out.add(gpu);
                continue;
            }
            int max = uintOut(Fn.MIG_COUNT, h).orElse(0);
            for (int m = 0; m < max; m++) {
                if (NvmlBinding.MigHandle.nvmlDeviceGetMigDeviceHandleByIndex(h, m, addr(scratch)) != 0) {
                    continue;
                }
                long mh = scratch.getLong(0);
                Optional<String> migUuid = string(Fn.UUID, mh);
                if (migUuid.isEmpty()) {
                    continue;
                }
                out.add(new RawDevice(mh, i, migUuid.get(), string(Fn.NAME, mh).orElse(name), serial,
                        memoryTotal(mh).orElse(0), major, minorCc, bus, minor, persist, true, Optional.of(uuid),
                        uintOut(Fn.GPU_INSTANCE_ID, mh).orElse(-1), uintOut(Fn.COMPUTE_INSTANCE_ID, mh).orElse(-1)));
            }
        }
        return out;
    }

    /** @return NVML's topology level between two GPUs (0, 10, .. 50), or empty */
    public synchronized OptionalInt commonAncestor(long a, long b) {
        if (!nvml.has(Fn.TOPOLOGY)) {
            return OptionalInt.empty();
        }
        int rc = NvmlBinding.Topology.nvmlDeviceGetTopologyCommonAncestor(a, b, addr(scratch));
        return rc == 0 ? OptionalInt.of(scratch.getInt(0)) : OptionalInt.empty();
    }

    /**
     * The active NVLinks of a GPU: for each, the remote PCI bus id, or {@code "NVSWITCH"} for a link into a switch.
     */
    public synchronized List<String> nvLinkPeers(long device) {
        List<String> peers = new ArrayList<>();
        if (!nvml.has(Fn.NVLINK_STATE)) {
            return peers;
        }
        for (int link = 0; link < NvmlLayout.NVLINK_MAX_LINKS; link++) {
            int rc = NvmlBinding.NvLinkState.nvmlDeviceGetNvLinkState(device, link, addr(scratch));
            if (rc != 0) {
                if (rc == NvmlReturn.ERROR_NOT_SUPPORTED.code() || rc == NvmlReturn.ERROR_INVALID_ARGUMENT.code()) {
                    break;
                }
                continue;
            }
            if (scratch.getInt(0) != 1) {
                continue;
            }
            if (nvml.has(Fn.NVLINK_REMOTE_TYPE)
                    && NvmlBinding.NvLinkRemoteType.nvmlDeviceGetNvLinkRemoteDeviceType(device, link, addr(scratch)) == 0
                    && scratch.getInt(0) == NvmlLayout.NVLINK_DEVICE_TYPE_SWITCH) {
                peers.add("NVSWITCH");
                continue;
            }
            if (nvml.has(Fn.NVLINK_REMOTE_PCI)
                    && NvmlBinding.NvLinkRemotePci.nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, addr(pci)) == 0) {
                peers.add(pci.getString(NvmlLayout.PCI_BUS_ID, StandardCharsets.US_ASCII.name()));
            }
        }
        return peers;
    }

    /**
     * Lists the compute processes of a device, growing the buffer when NVML answers INSUFFICIENT_SIZE.
     *
     * @return pid and used bytes (-1 when not reported) pairs, or empty when the call is not available
     */
    public synchronized Optional<List<long[]>> processes(long device) {
        if (!nvml.has(Fn.PROCESSES)) {
            return Optional.empty();
        }
        int capacity = 16;
        for (int attempt = 0; attempt < 4; attempt++) {
            Memory infos = new Memory((long) capacity * NvmlLayout.PROCESS_SIZE);
            scratch.setInt(0, capacity);
            int rc = NvmlBinding.Processes.nvmlDeviceGetComputeRunningProcesses_v3(device, addr(scratch), addr(infos));
            int count = scratch.getInt(0);
            if (rc == NvmlReturn.ERROR_INSUFFICIENT_SIZE.code()) {
                capacity = Math.max(capacity * 2, count + 8);
                continue;
            }
            if (rc != 0) {
                throw new NvmlCallException("nvmlDeviceGetComputeRunningProcesses_v3", rc);
            }
            List<long[]> out = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                long base = (long) i * NvmlLayout.PROCESS_SIZE;
                out.add(new long[] {infos.getInt(base + NvmlLayout.PROCESS_PID) & 0xFFFFFFFFL,
                        infos.getLong(base + NvmlLayout.PROCESS_USED_MEMORY)});
            }
            return Optional.of(out);
        }
        throw new NvmlCallException("nvmlDeviceGetComputeRunningProcesses_v3 (list kept growing)",
                NvmlReturn.ERROR_INSUFFICIENT_SIZE.code());
    }

    /** @return a cheap probe of a device: 0 if it answers, else the NVML code (15: lost) */
    public synchronized int probe(long device) {
        if (nvml.has(Fn.MINOR)) {
            return NvmlBinding.Minor.nvmlDeviceGetMinorNumber(device, addr(scratch));
        }
        return nvml.has(Fn.UUID) ? NvmlBinding.Uuid.nvmlDeviceGetUUID(device, addr(scratch), NvmlLayout.STRING_BUFFER)
                : 0;
    }

    @Override
    public synchronized void close() {
        if (open) {
            open = false;
            NvmlBinding.Core.nvmlShutdown();
            NvmlBinding.release();
        }
    }

    /**
     * Reads utilization, memory used, temperature and power of a fixed set of devices into a {@code long[]}, reusing
     * one native block per device: no allocation per sweep. Not thread-safe; callers serialize.
     */
    public final class Poller {
        /** Values per device in {@link #values()}: status, utilization %, memory used bytes, temperature, power mW. */
        public static final int STRIDE = 5;
        /** Marker for a value not reported. */
        public static final long ABSENT = Long.MIN_VALUE;

        private final long[] handles;
        private final Memory[] blocks;
        private final long[] blockAddr;
        private final long[] values;
        private final boolean memV2 = nvml.has(Fn.MEMORY_V2);
        private final boolean mem = nvml.has(Fn.MEMORY);
        private final boolean util = nvml.has(Fn.UTILIZATION);
        private final boolean temp = nvml.has(Fn.TEMPERATURE);
        private final boolean power = nvml.has(Fn.POWER);

        /** @param handles device handles, in the order values are laid out */
        public Poller(long[] handles) {
            this.handles = handles.clone();
            this.blocks = new Memory[handles.length];
            this.blockAddr = new long[handles.length];
            for (int i = 0; i < handles.length; i++) {
                blocks[i] = new Memory(64);
                blockAddr[i] = addr(blocks[i]);
            }
            this.values = new long[handles.length * STRIDE];
        }

        /** @return the array {@link #sweep()} fills: per device, {@link #STRIDE} longs */
        public long[] values() {
            return values;
        }

        /**
         * Reads every device once. Slot 0 of a device is 0, or the NVML code of the first failing call
         * ({@code 15}: the GPU is lost). Values a device does not report are {@link #ABSENT}.
         */
        public void sweep() {
            for (int i = 0; i < handles.length; i++) {
                long h = handles[i];
                long a = blockAddr[i];
                Memory m = blocks[i];
                int base = i * STRIDE;
                int status = 0;
                long u = ABSENT;
                if (util) {
                    int rc = NvmlBinding.Utilization.nvmlDeviceGetUtilizationRates(h, a);
                    if (rc == 0) {
                        u = m.getInt(NvmlLayout.UTILIZATION_GPU) & 0xFFFFFFFFL;
                    } else if (rc != 3) {
                        status = rc;
                    }
                }
                long used = ABSENT;
                if (memV2) {
                    m.setInt(NvmlLayout.MEMORY_V2_VERSION_FIELD, NvmlLayout.MEMORY_V2_VERSION);
                    int rc = NvmlBinding.MemoryV2.nvmlDeviceGetMemoryInfo_v2(h, a);
                    if (rc == 0) {
                        used = m.getLong(NvmlLayout.MEMORY_V2_USED);
                    } else if (rc != 3 && status == 0) {
                        status = rc;
                    }
                }
                if (used == ABSENT && mem) {
                    int rc = NvmlBinding.Memory.nvmlDeviceGetMemoryInfo(h, a);
                    if (rc == 0) {
                        used = m.getLong(NvmlLayout.MEMORY_USED);
                    } else if (rc != 3 && status == 0) {
                        status = rc;
                    }
                }
                long t = ABSENT;
                if (temp) {
                    int rc = NvmlBinding.Temperature.nvmlDeviceGetTemperature(h, NvmlLayout.TEMPERATURE_GPU, a);
                    if (rc == 0) {
                        t = m.getInt(0) & 0xFFFFFFFFL;
                    } else if (rc != 3 && status == 0) {
                        status = rc;
                    }
                }
                long p = ABSENT;
                if (power) {
                    int rc = NvmlBinding.Power.nvmlDeviceGetPowerUsage(h, a);
                    if (rc == 0) {
                        p = m.getInt(0) & 0xFFFFFFFFL;
                    } else if (rc != 3 && status == 0) {
                        status = rc;
                    }
                }
                values[base] = status;
                values[base + 1] = u;
                values[base + 2] = used;
                values[base + 3] = t;
                values[base + 4] = p;
            }
        }
    }

    /** An NVML event set watching XID critical errors. Not thread-safe; one watcher thread uses it. */
    public final class EventWatch implements AutoCloseable {
        private final long set;
        private final Memory data = new Memory(NvmlLayout.EVENT_SIZE);
        private final long dataAddr = addr(data);
        private final List<Long> registered = new ArrayList<>();

        /** @param devices GPU handles to watch (physical GPUs, not MIG devices) */
        public EventWatch(long[] devices) {
            if (!nvml.has(Fn.EVENTS)) {
                throw new NvmlCallException("nvmlEventSetCreate (absent from this driver)",
                        NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code());
            }
            check("nvmlEventSetCreate", NvmlBinding.Events.nvmlEventSetCreate(addr(scratch)));
            this.set = scratch.getLong(0);
            for (long d : devices) {
                Memory types = new Memory(8);
                if (NvmlBinding.Events.nvmlDeviceGetSupportedEventTypes(d, addr(types)) != 0) {
                    continue;
                }
                long mask = types.getLong(0) & NvmlLayout.EVENT_TYPE_XID;
                if (mask != 0 && NvmlBinding.Events.nvmlDeviceRegisterEvents(d, mask, set) == 0) {
                    registered.add(d);
                }
            }
        }

        /** @return how many GPUs have XID events registered */
        public int registeredCount() {
            return registered.size();
        }

        /**
         * Waits for one event.
         *
         * @return NVML's code: 0 with {@link #lastDevice()} etc. filled, 10 on timeout, 15 when a GPU is lost
         */
        public int await(int timeoutMs) {
            return NvmlBinding.Events.nvmlEventSetWait_v2(set, dataAddr, timeoutMs);
        }

        /** @return the device handle of the last event */
        public long lastDevice() {
            return data.getLong(NvmlLayout.EVENT_DEVICE);
        }

        /** @return the event type mask of the last event */
        public long lastType() {
            return data.getLong(NvmlLayout.EVENT_TYPE);
        }

        /** @return the XID of the last event */
        public long lastData() {
            return data.getLong(NvmlLayout.EVENT_DATA);
        }

        /** @return the GPU instance id of the last event, 0xFFFFFFFF when not attributable */
        public long lastGpuInstance() {
            return data.getInt(NvmlLayout.EVENT_GPU_INSTANCE) & 0xFFFFFFFFL;
        }

        /** @return the compute instance id of the last event, 0xFFFFFFFF when not attributable */
        public long lastComputeInstance() {
            return data.getInt(NvmlLayout.EVENT_COMPUTE_INSTANCE) & 0xFFFFFFFFL;
        }

        @Override
        public void close() {
            NvmlBinding.Events.nvmlEventSetFree(set);
        }
    }

    /** @return {@link Native#POINTER_SIZE}, which the binding assumes is 8 */
    public static int pointerSize() {
        return Native.POINTER_SIZE;
    }
}
