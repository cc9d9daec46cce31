package io.gpusched.rocm;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/** Builds the fake librocm_smi64 with gcc against the real rocm_smi.h and drives it. */
final class FakeRocmSmi {
    static final Path HEADER = Path.of("/usr/include/rocm_smi/rocm_smi.h");

    private FakeRocmSmi() {
    }

    static Optional<String> unavailableReason() {
        if (!Files.isRegularFile(HEADER)) {
            return Optional.of(HEADER + " is absent (install Debian's librocm-smi-dev)");
        }
        if (!Files.isExecutable(Path.of("/usr/bin/gcc"))) {
            return Optional.of("gcc is not installed");
        }
        return Optional.empty();
    }

    static Path build(Path dir) throws IOException, InterruptedException {
        Path src = dir.resolve("fake_rocm_smi.c");
        try (InputStream in = FakeRocmSmi.class.getResourceAsStream("/native/fake_rocm_smi.c")) {
            Files.copy(in, src, StandardCopyOption.REPLACE_EXISTING);
        }
        Path out = dir.resolve("librocm_smi64.so.1");
        Process p = new ProcessBuilder(List.of("/usr/bin/gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
                "-fPIC", "-o", out.toString(), src.toString())).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("gcc failed for the fake ROCm SMI: " + log);
        }
        return out;
    }

    /** Control functions of the fake. */
    static final class Control {
        static native void fake_rsmi_reset();
        static native void fake_rsmi_set_init_result(int r);
        static native int fake_rsmi_init_calls();
        static native int fake_rsmi_initialized();
        static native void fake_rsmi_set_devices(int n, long[] bdfIds);
        /** Device {@code dv}'s energy accumulator is now {@code counter} (15.3 µJ each); below 0: NOT_SUPPORTED. */
        static native void fake_rsmi_set_energy(int dv, long counter);
        /** Adds a compute process: its VRAM summed over its GPUs, and the ROCm SMI indices of those GPUs. */
        static native int fake_rsmi_add_process(int pid, long vram, int ngpus, int[] gpus);
        /** @return sizeof (0) and offsets of process_id (1) and vram_usage (2) of rsmi_process_info_t */
        static native long fake_rsmi_layout(int which);

        static void bind(Path lib) {
            Native.register(Control.class, NativeLibrary.getInstance(lib.toAbsolutePath().toString()));
        }
    }
}
