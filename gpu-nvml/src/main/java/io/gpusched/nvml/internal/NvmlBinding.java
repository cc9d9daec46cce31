package io.gpusched.nvml.internal;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The NVML binding: JNA direct mapping of the versioned NVML symbols, pointers passed as {@code long} addresses so
 * that a call allocates nothing. Each optional symbol is bound on its own: one missing from an older driver makes
 * only its field absent. NVML is bound once per JVM; binding another library path while none is in use rebinds.
 * Internal: no JNA type leaves this package.
 */
public final class NvmlBinding {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlBinding.class);

    /** The soname the driver ships (there is no unversioned name without the -dev package). */
    public static final String SONAME = "libnvidia-ml.so.1";

    /** Symbols bound separately; {@link #CORE} must all be present. */
    public enum Fn {
        CORE(Core.class), UUID(Uuid.class), NAME(Name.class), SERIAL(Serial.class), MEMORY(Memory.class),
        MEMORY_V2(MemoryV2.class), COMPUTE_CAPABILITY(ComputeCapability.class), PCI(Pci.class), MINOR(Minor.class),
        DRIVER_VERSION(DriverVersion.class), CUDA_DRIVER_VERSION(CudaDriverVersion.class),
        PERSISTENCE(Persistence.class), MIG_MODE(MigMode.class), MIG_COUNT(MigCount.class),
        MIG_HANDLE(MigHandle.class), GPU_INSTANCE_ID(GpuInstanceId.class),
        COMPUTE_INSTANCE_ID(ComputeInstanceId.class), TOPOLOGY(Topology.class), NVLINK_STATE(NvLinkState.class),
        NVLINK_REMOTE_PCI(NvLinkRemotePci.class), NVLINK_REMOTE_TYPE(NvLinkRemoteType.class),
        UTILIZATION(Utilization.class), TEMPERATURE(Temperature.class), POWER(Power.class),
        PROCESSES(Processes.class), EVENTS(Events.class), ENERGY(Energy.class),
        PROCESS_UTILIZATION(ProcessUtilization.class);

        final Class<?> holder;

        Fn(Class<?> holder) {
            this.holder = holder;
        }
    }

    // ---- one holder class per symbol group; methods named exactly as the C symbols ----
    /** Required. */
    public static final class Core {
        public static native int nvmlInit_v2();
        public static native int nvmlShutdown();
        public static native int nvmlDeviceGetCount_v2(long count);
        public static native int nvmlDeviceGetHandleByIndex_v2(int index, long device);
    }
    public static final class Uuid { public static native int nvmlDeviceGetUUID(long device, long buf, int length); }
    public static final class Name { public static native int nvmlDeviceGetName(long device, long buf, int length); }
    public static final class Serial {
        public static native int nvmlDeviceGetSerial(long device, long buf, int length);
    }
    public static final class Memory { public static native int nvmlDeviceGetMemoryInfo(long device, long memory); }
    public static final class MemoryV2 {
        public static native int nvmlDeviceGetMemoryInfo_v2(long device, long memory);
    }
    public static final class ComputeCapability {
        public static native int nvmlDeviceGetCudaComputeCapability(long device, long major, long minor);
    }
    public static final class Pci { public static native int nvmlDeviceGetPciInfo_v3(long device, long pci); }
    public static final class Minor { public static native int nvmlDeviceGetMinorNumber(long device, long minor); }
    public static final class DriverVersion {
        public static native int nvmlSystemGetDriverVersion(long buf, int length);
    }
    public static final class CudaDriverVersion {
        public static native int nvmlSystemGetCudaDriverVersion(long version);
    }
    public static final class Persistence {
        public static native int nvmlDeviceGetPersistenceMode(long device, long mode);
    }
    public static final class MigMode {
        public static native int nvmlDeviceGetMigMode(long device, long current, long pending);
    }
    public static final class MigCount {
        public static native int nvmlDeviceGetMaxMigDeviceCount(long device, long count);
    }
    public static final class MigHandle {
        public static native int nvmlDeviceGetMigDeviceHandleByIndex(long device, int index, long migDevice);
    }
    public static final class GpuInstanceId {
        public static native int nvmlDeviceGetGpuInstanceId(long device, long id);
    }
    public static final class ComputeInstanceId {
        public static native int nvmlDeviceGetComputeInstanceId(long device, long id);
    }
    public static final class Topology {
        public static native int nvmlDeviceGetTopologyCommonAncestor(long device1, long device2, long pathInfo);
    }
    public static final class NvLinkState {
        public static native int nvmlDeviceGetNvLinkState(long device, int link, long isActive);
    }
    public static final class NvLinkRemotePci {
        public static native int nvmlDeviceGetNvLinkRemotePciInfo_v2(long device, int link, long pci);
    }
    public static final class NvLinkRemoteType {
        public static native int nvmlDeviceGetNvLinkRemoteDeviceType(long device, int link, long type);
    }
    public static final class Utilization {
        public static native int nvmlDeviceGetUtilizationRates(long device, long utilization);
    }
    public static final class Temperature {
        public static native int nvmlDeviceGetTemperature(long device, int sensor, long temp);
    }
    public static final class Power { public static native int nvmlDeviceGetPowerUsage(long device, long milliwatts); }
    public static final class Processes {
        public static native int nvmlDeviceGetComputeRunningProcesses_v3(long device, long count, long infos);
    }
    /** Volta and later: the device's total energy counter, mJ since the driver was loaded. */
    public static final class Energy {
        public static native int nvmlDeviceGetTotalEnergyConsumption(long device, long energy);
    }
    /** Maxwell and later, not on MIG: per-process utilization samples newer than {@code lastSeenTimeStamp} (µs). */
    public static final class ProcessUtilization {
        public static native int nvmlDeviceGetProcessUtilization(long device, long utilization, long count,
                long lastSeenTimeStamp);
    }
    public static final class Events {
        public static native int nvmlEventSetCreate(long set);
        public static native int nvmlDeviceGetSupportedEventTypes(long device, long types);
        public static native int nvmlDeviceRegisterEvents(long device, long types, long set);
        public static native int nvmlEventSetWait_v2(long set, long data, int timeoutMs);
        public static native int nvmlEventSetFree(long set);
    }

    /**
     * Every NVML symbol this binding declares, read from the holder classes (not a hand-kept list): what the fault
     * injection tests iterate over. Each returns an {@code nvmlReturn_t}.
     *
     * @return symbol names, grouped by {@link Fn} in declaration order
     */
    public static List<String> entryPoints() {
        List<String> out = new ArrayList<>();
        for (Fn fn : Fn.values()) {
            List<String> names = new ArrayList<>();
            for (Method m : fn.holder.getDeclaredMethods()) {
                if (Modifier.isNative(m.getModifiers())) {
                    if (m.getReturnType() != int.class) {
                        throw new IllegalStateException(m.getName() + " does not return an nvmlReturn_t");
                    }
                    names.add(m.getName());
                }
            }
            names.sort(null);
            out.addAll(names);
        }
        return out;
    }

    // ---- loading ----
    private static NvmlBinding current;
    private static int users;

    private final String path;
    private final Map<Fn, Boolean> bound;
    private final boolean[] has = new boolean[Fn.values().length];

    private NvmlBinding(String path, Map<Fn, Boolean> bound) {
        this.path = path;
        this.bound = bound;
        for (Map.Entry<Fn, Boolean> e : bound.entrySet()) {
            has[e.getKey().ordinal()] = e.getValue();
        }
    }

    /** @return true if the symbol group is bound (present in this driver's library) */
    public boolean has(Fn fn) {
        return has[fn.ordinal()];
    }

    /** @return the groups missing from this library */
    public List<Fn> missing() {
        List<Fn> out = new ArrayList<>();
        bound.forEach((k, v) -> {
            if (!v) {
                out.add(k);
            }
        });
        return out;
    }

    /** @return the path or name the library was loaded from */
    public String path() {
        return path;
    }

    /**
     * Where to look: an explicit file, else {@value #SONAME} through {@code jna.library.path} and the loader's paths.
     */
    static String resolve(Optional<Path> explicit) {
        if (explicit.isPresent()) {
            Path p = explicit.get();
            if (!Files.exists(p)) {
                throw new NvmlLoadException("library not found: " + p + " does not exist");
            }
            return p.toAbsolutePath().toString();
        }
        return SONAME;
    }

    /**
     * Binds the library (or reuses the current binding of the same path) and counts a user; pair with {@link
     * #release()}.
     *
     * @throws NvmlLoadException with a one-line cause when the library cannot be loaded or lacks a required symbol
     */
    public static synchronized NvmlBinding acquire(Optional<Path> explicit) {
        if (Boolean.getBoolean("gpusched.native.disable")) {
            throw new NvmlLoadException("native code is disabled (-Dgpusched.native.disable=true)");
        }
        String path = resolve(explicit);
        if (current != null && current.path.equals(path)) {
            users++;
            return current;
        }
        if (current != null && users > 0) {
            throw new NvmlLoadException("NVML is already bound to " + current.path + " in this JVM and in use; cannot"
                    + " also bind " + path);
        }
        if (current != null) {
            for (Fn fn : Fn.values()) {
                if (current.has(fn)) {
                    Native.unregister(fn.holder);
                }
            }
            current = null;
        }
        NativeLibrary lib;
        try {
            lib = NativeLibrary.getInstance(path, NvmlBinding.class.getClassLoader());
        } catch (UnsatisfiedLinkError e) {
            throw new NvmlLoadException("library not found: " + path + " (" + firstLine(e.getMessage()) + ")");
        }
        Map<Fn, Boolean> bound = new EnumMap<>(Fn.class);
        for (Fn fn : Fn.values()) {
            try {
                Native.register(fn.holder, lib);
                bound.put(fn, true);
            } catch (UnsatisfiedLinkError | IllegalArgumentException e) {
                if (fn == Fn.CORE) {
                    throw new NvmlLoadException(path + " is not a usable NVML library: " + firstLine(e.getMessage()));
                }
                LOG.debug("NVML symbol group {} absent from {}: {}", fn, path, e.getMessage());
                bound.put(fn, false);
            }
        }
        current = new NvmlBinding(path, bound);
        users = 1;
        if (!current.missing().isEmpty()) {
            LOG.debug("NVML at {} lacks {}; those fields will be absent", path, current.missing());
        }
        return current;
    }

    /** Counts a user out. */
    public static synchronized void release() {
        if (users > 0) {
            users--;
        }
    }

    private static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int nl = s.indexOf('\n');
        return (nl < 0 ? s : s.substring(0, nl)).trim();
    }

    /** The library could not be loaded or bound; the message is one line fit for {@code unavailabilityCause()}. */
    public static final class NvmlLoadException extends RuntimeException {
        /** @param message the cause */
        public NvmlLoadException(String message) {
            super(message);
        }
    }
}
