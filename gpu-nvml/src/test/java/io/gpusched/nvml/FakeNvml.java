package io.gpusched.nvml;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Builds the fake {@code libnvidia-ml.so.1} from {@code native/fake_nvml.c} with gcc against the real
 * {@code /usr/include/nvml.h}, and drives it through its control functions.
 */
public final class FakeNvml {
    /** The real vendor header the fake must compile against. */
    public static final Path HEADER = Path.of("/usr/include/nvml.h");

    private FakeNvml() {
    }

    /** @return why the fake cannot be built here, or empty when it can */
    public static Optional<String> unavailableReason() {
        if (!Files.isRegularFile(HEADER)) {
            return Optional.of(HEADER + " is absent (install Debian's libnvidia-ml-dev from non-free)");
        }
        if (findGcc().isEmpty()) {
            return Optional.of("gcc is not on the PATH");
        }
        return Optional.empty();
    }

    private static Optional<Path> findGcc() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
            Path p = Path.of(dir, "gcc");
            if (Files.isExecutable(p)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /**
     * Compiles the fake into {@code dir/libnvidia-ml.so.1}.
     *
     * @param oldDriver leave out the symbols drivers before R510 lack
     */
    public static Path build(Path dir, boolean oldDriver) throws IOException, InterruptedException {
        return oldDriver ? build(dir, "OLD_DRIVER") : build(dir, new String[0]);
    }

    /**
     * Compiles the fake into {@code dir/libnvidia-ml.so.1} with these macros defined ({@code OLD_DRIVER}: leave out
     * what drivers before R510 lack; {@code NO_PROCESS_CALLS}: leave out the per-process and energy calls).
     */
    public static Path build(Path dir, String... defines) throws IOException, InterruptedException {
        Path src = dir.resolve("fake_nvml.c");
        try (InputStream in = FakeNvml.class.getResourceAsStream("/native/fake_nvml.c")) {
            Files.copy(in, src, StandardCopyOption.REPLACE_EXISTING);
        }
        Path out = dir.resolve("libnvidia-ml.so.1");
        List<String> cmd = new java.util.ArrayList<>(List.of(findGcc().orElseThrow().toString(), "-std=c11",
                "-D_POSIX_C_SOURCE=200809L", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"));
        for (String d : defines) {
            cmd.add("-D" + d);
        }
        cmd.addAll(List.of("-o", out.toString(), src.toString(), "-lpthread"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("gcc failed for the fake NVML: " + log);
        }
        return out;
    }

    /** Direct-mapped control functions of the fake. */
    public static final class Control {
        public static native void fake_nvml_reset();
        public static native void fake_nvml_set_scenario(int s);
        public static native void fake_nvml_set_init_result(int r);
        public static native void fake_nvml_set_lost(int gpu, int lost);
        public static native void fake_nvml_set_processes(int gpu, int n);
        public static native int fake_nvml_push_xid(int gpu, long xid, int gi, int ci);
        public static native long fake_nvml_layout(int which);
        public static native long fake_nvml_calls();
        public static native int fake_nvml_initialized();
        /** From now on {@code fn} answers {@code rc} for GPU {@code gpu} (every call when -1); -1 if not modelled. */
        public static native int fake_nvml_inject(String fn, int gpu, int rc);
        public static native void fake_nvml_clear_injections();
        /** @return 1 init, 2 node, 3 one device, 4 a pair of devices; 0 for a name the fake does not model */
        public static native int fake_nvml_scope(String fn);
        /** @return calls of {@code fn} about GPU {@code gpu} (-1: all) */
        public static native long fake_nvml_calls_of(String fn, int gpu);
        /** @return calls of {@code fn} that answered an injected error */
        public static native long fake_nvml_hits(String fn);
        /** @return lifecycle violations: 1 shutdown during a wait, 2 shutdown with the event set allocated, 4 a call
         *  after the last shutdown */
        public static native int fake_nvml_violations();
        public static native void fake_nvml_block_wait(int on);
        public static native int fake_nvml_in_wait();
        public static native int fake_nvml_event_set_allocated();
        /** GPU {@code gpu}'s total-energy counter is now {@code mj}; below 0: the call answers NOT_SUPPORTED. */
        public static native void fake_nvml_set_energy(int gpu, long mj);
        /** Utilization %, memory used (bytes) and power (mW) of GPU {@code gpu} from now on; -1 keeps the default. */
        public static native void fake_nvml_set_device(int gpu, long util, long used, long powerMw);
        /** The compute processes of GPU {@code gpu} ({@code mig} -1) or of its MIG device {@code mig}: none. */
        public static native void fake_nvml_clear_procs(int gpu, int mig);
        /** Adds or updates a compute process; {@code mem} below 0: NVML_VALUE_NOT_AVAILABLE. @return 0, -1 if full */
        public static native int fake_nvml_add_proc(int gpu, int mig, int pid, long mem);
        /** Removes a compute process. */
        public static native void fake_nvml_remove_proc(int gpu, int mig, int pid);
        /** The driver recorded a utilization sample of {@code pid} at {@code ts} µs. @return 0, -1 if full */
        public static native int fake_nvml_add_util_sample(int gpu, int pid, long ts, int sm);
        /** @return the lastSeenTimeStamp the last nvmlDeviceGetProcessUtilization call about {@code gpu} passed */
        public static native long fake_nvml_last_seen(int gpu);

        private static String boundTo;

        /** Binds the control functions to the fake at {@code lib} (once per JVM and path). */
        public static synchronized void bind(Path lib) {
            String p = lib.toAbsolutePath().toString();
            if (p.equals(boundTo)) {
                return;
            }
            if (boundTo != null) {
                Native.unregister(Control.class);
            }
            Native.register(Control.class, NativeLibrary.getInstance(p));
            boundTo = p;
        }
    }

    /** Scenario numbers of the fake. */
    public static final int DGX1 = 0;
    /** 8x H100 over NVSwitch. */
    public static final int HGX = 1;
    /** 2x A100, GPU 0 in MIG mode. */
    public static final int MIG = 2;

    /** Scopes {@link Control#fake_nvml_scope} answers. */
    public static final int SCOPE_INIT = 1;
    /** A call about the node (driver version, event set). */
    public static final int SCOPE_NODE = 2;
    /** A call about one device. */
    public static final int SCOPE_DEVICE = 3;
    /** A call about a pair of devices. */
    public static final int SCOPE_PAIR = 4;
}
