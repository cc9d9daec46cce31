package io.gpusched.nvml;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * A WSL2 host: GPUs reach Linux through one paravirtual device, {@code /dev/dxg}, and the Windows driver's libraries
 * in {@code /usr/lib/wsl/lib} ({@code libdxcore.so}, {@code libnvidia-ml.so.1}, ...); there are no
 * {@code /dev/nvidia*} nodes. Detected by either of those two paths (NVIDIA's go-nvlib takes {@code libdxcore.so} as
 * the sign). NVML is opened from the WSL library directory; what cannot work there is in {@link #limitations()}.
 *
 * @param root       the host root the paths were looked up under ({@code /})
 * @param libraryDir the WSL library directory
 * @param nvml       {@code libnvidia-ml.so.1} in it, if present
 */
public record Wsl2(Path root, Path libraryDir, Optional<Path> nvml) {
    /** What gpusched cannot do on WSL2, one line each (printed by {@code gpusched doctor}). */
    public static final List<String> LIMITATIONS = List.of(
            "no per-GPU device node: every GPU is behind the one /dev/dxg, so gpusched cannot fence a job to its GPUs"
                    + " (device cgroups, CDI device nodes and Slurm gres.conf File= have nothing per GPU to name);"
                    + " allocation and CUDA_VISIBLE_DEVICES still work",
            "NVML on WSL2 does not support nvmlDeviceGetMinorNumber (no device minor), utilization rates and process"
                    + " lists (Not Supported), and reports no NUMA node or NVLink/P2P topology: placement by links"
                    + " and NUMA, utilization-aware placement and per-process accounting have nothing to read",
            "MIG is not available on WSL2");

    /** @return the WSL2 facts under {@code root}, or empty when neither {@code /dev/dxg} nor the library dir exists */
    public static Optional<Wsl2> detect(Path root) {
        Path dir = root.resolve("usr/lib/wsl/lib");
        boolean dxg = Files.exists(root.resolve("dev/dxg"));
        boolean dxcore = Files.exists(dir.resolve("libdxcore.so"));
        if (!dxg && !dxcore) {
            return Optional.empty();
        }
        Path lib = dir.resolve("libnvidia-ml.so.1");
        return Optional.of(new Wsl2(root, dir, Files.exists(lib) ? Optional.of(lib) : Optional.empty()));
    }

    /** @return {@link #LIMITATIONS} */
    public List<String> limitations() {
        return LIMITATIONS;
    }

    /** @return a one-line summary for doctor and causes */
    public String describe() {
        return "WSL2 (" + root.resolve("dev/dxg") + ", " + libraryDir + "): NVML from " + nvml.map(Path::toString)
                .orElse(libraryDir + "/libnvidia-ml.so.1, which is absent (is the Windows NVIDIA driver installed?)");
    }
}
