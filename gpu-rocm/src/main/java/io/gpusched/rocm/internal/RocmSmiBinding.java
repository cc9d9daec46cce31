package io.gpusched.rocm.internal;

import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * ROCm SMI through JNA direct mapping, pointers as {@code long} addresses. {@code librocm_smi64} is found under any
 * of its sonames ({@code .so.1} on Debian, {@code .so.6}, {@code .so.7}); {@code rsmi_dev_power_get} is optional
 * (absent from 5.x), as are the energy counter ({@code rsmi_dev_energy_count_get}) and the process list
 * ({@code rsmi_compute_process_info_get}, {@code rsmi_compute_process_gpus_get}). Bound once per JVM; another path may
 * be bound only while none is in use. Internal.
 */
public final class RocmSmiBinding {
    /** Sonames tried in order, then the unversioned name. */
    public static final List<String> SONAMES =
            List.of("librocm_smi64.so.1", "librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so");

    /** Required symbols (present since ROCm 3). */
    public static final class Core {
        public static native int rsmi_init(long flags);
        public static native int rsmi_shut_down();
        public static native int rsmi_num_monitor_devices(long count);
        public static native int rsmi_dev_name_get(int dv, long name, long len);
        public static native int rsmi_dev_unique_id_get(int dv, long id);
        public static native int rsmi_dev_pci_id_get(int dv, long bdfid);
        public static native int rsmi_dev_memory_total_get(int dv, int type, long total);
        public static native int rsmi_dev_memory_usage_get(int dv, int type, long used);
        public static native int rsmi_dev_busy_percent_get(int dv, long percent);
        public static native int rsmi_dev_temp_metric_get(int dv, int sensor, int metric, long temperature);
        public static native int rsmi_dev_power_ave_get(int dv, int sensor, long power);
        public static native int rsmi_status_string(int status, long text);
    }

    /** Optional: newer ROCm only. */
    public static final class PowerGet {
        public static native int rsmi_dev_power_get(int dv, long power, long type);
    }

    /** Optional: the energy accumulator (ROCm 4.x and later, on GPUs whose firmware has it). */
    public static final class Energy {
        public static native int rsmi_dev_energy_count_get(int dv, long power, long resolution, long timestamp);
    }

    /** Optional: the node's compute processes and the GPUs each uses. */
    public static final class Processes {
        public static native int rsmi_compute_process_info_get(long procs, long numItems);
        public static native int rsmi_compute_process_gpus_get(int pid, long indices, long numDevices);
    }

    private static String current;
    private static boolean hasPowerGet;
    private static boolean hasEnergy;
    private static boolean hasProcesses;
    private static int users;

    private RocmSmiBinding() {
    }

    /** The library could not be loaded; the message is a one-line cause. */
    public static final class LoadException extends RuntimeException {
        /** @param m cause */
        public LoadException(String m) {
            super(m);
        }
    }

    /** @return candidate library names/paths for an explicit path or the search */
    static List<String> candidates(Optional<Path> explicit) {
        if (explicit.isPresent()) {
            return List.of(explicit.get().toAbsolutePath().toString());
        }
        List<String> out = new ArrayList<>(SONAMES);
        for (String dir : List.of("/opt/rocm/lib", "/opt/rocm/lib64")) {
            for (String s : SONAMES) {
                if (Files.exists(Path.of(dir, s))) {
                    out.add(Path.of(dir, s).toString());
                }
            }
        }
        return out;
    }

    /** Binds (or reuses) the library and counts a user. @return the path bound */
    public static synchronized String acquire(Optional<Path> explicit) {
        if (Boolean.getBoolean("gpusched.native.disable")) {
            throw new LoadException("native code is disabled (-Dgpusched.native.disable=true)");
        }
        if (explicit.isPresent() && !Files.exists(explicit.get())) {
            throw new LoadException("library not found: " + explicit.get() + " does not exist");
        }
        List<String> names = candidates(explicit);
        if (current != null && (names.contains(current) || explicit.isEmpty())) {
            users++;
            return current;
        }
        if (current != null && users > 0) {
            throw new LoadException("ROCm SMI is already bound to " + current + " in this JVM and in use");
        }
        if (current != null) {
            Native.unregister(Core.class);
            if (hasPowerGet) {
                Native.unregister(PowerGet.class);
            }
            if (hasEnergy) {
                Native.unregister(Energy.class);
            }
            if (hasProcesses) {
                Native.unregister(Processes.class);
            }
            current = null;
        }
        List<String> errors = new ArrayList<>();
        for (String name : names) {
            NativeLibrary lib;
            try {
                lib = NativeLibrary.getInstance(name, RocmSmiBinding.class.getClassLoader());
            } catch (UnsatisfiedLinkError e) {
                errors.add(name);
                continue;
            }
            try {
                Native.register(Core.class, lib);
            } catch (UnsatisfiedLinkError e) {
                throw new LoadException(name + " is not a usable ROCm SMI library: " + e.getMessage());
            }
            try {
                Native.register(PowerGet.class, lib);
                hasPowerGet = true;
            } catch (UnsatisfiedLinkError e) {
                hasPowerGet = false;
            }
            hasEnergy = optional(Energy.class, lib);
            hasProcesses = optional(Processes.class, lib);
            current = name;
            users = 1;
            return name;
        }
        throw new LoadException("library not found: none of " + errors + " could be loaded");
    }

    private static boolean optional(Class<?> holder, NativeLibrary lib) {
        try {
            Native.register(holder, lib);
            return true;
        } catch (UnsatisfiedLinkError e) {
            return false;
        }
    }

    /** @return true if {@code rsmi_dev_energy_count_get} is bound */
    public static synchronized boolean hasEnergy() {
        return hasEnergy;
    }

    /** @return true if {@code rsmi_compute_process_info_get} and {@code rsmi_compute_process_gpus_get} are bound */
    public static synchronized boolean hasProcesses() {
        return hasProcesses;
    }

    /** @return true if {@code rsmi_dev_power_get} is bound */
    public static synchronized boolean hasPowerGet() {
        return hasPowerGet;
    }

    /** Counts a user out. */
    public static synchronized void release() {
        if (users > 0) {
            users--;
        }
    }

    /** @return ROCm SMI's own text for a status, or the status name */
    public static String describe(int status) {
        RsmiStatus s = RsmiStatus.of(status);
        try {
            Memory out = new Memory(8);
            out.setLong(0, 0);
            if (current != null && Core.rsmi_status_string(status, Pointer.nativeValue(out)) == 0
                    && out.getLong(0) != 0) {
                String text = new Pointer(out.getLong(0)).getString(0).trim();
                int cut = text.indexOf('.');
                return s + " (" + (cut > 0 ? text.substring(0, cut) : text) + ")";
            }
        } catch (UnsatisfiedLinkError | RuntimeException ignored) {
            // fall back to the name
        }
        return s.toString();
    }
}
