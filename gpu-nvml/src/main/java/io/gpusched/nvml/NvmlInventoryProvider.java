package io.gpusched.nvml;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlReturn;
import io.gpusched.nvml.internal.NvmlSession;
import java.nio.file.Path;
import java.util.Optional;

/** The NVML backend: highest priority for NVIDIA GPUs. Probing loads NVML and calls {@code nvmlInit_v2} once. */
public final class NvmlInventoryProvider implements GpuInventoryProvider {

    /** Priority: above the procfs (50) and nvidia-smi (30) fallbacks. */
    public static final int PRIORITY = 100;

    private final NvmlOptions options;
    private final Optional<Wsl2> wsl;

    /** With {@link NvmlOptions#defaults()} (ServiceLoader); on WSL2, NVML from {@code /usr/lib/wsl/lib}. */
    public NvmlInventoryProvider() {
        this(NvmlOptions.defaults(), Path.of("/"));
    }

    /** @param options settings */
    public NvmlInventoryProvider(NvmlOptions options) {
        this(options, Path.of("/"));
    }

    /**
     * @param options  settings; without a library given, on WSL2 NVML is loaded from the WSL library directory
     * @param hostRoot where {@code /dev/dxg} and {@code /usr/lib/wsl/lib} are looked for ({@code /}; a tree in tests)
     */
    public NvmlInventoryProvider(NvmlOptions options, Path hostRoot) {
        this.wsl = Wsl2.detect(hostRoot);
        this.options = options.library().isEmpty() && wsl.flatMap(Wsl2::nvml).isPresent()
                ? options.withLibrary(wsl.get().nvml().get()) : options;
    }

    /** @return the WSL2 host this provider runs on, if it is one (then see {@link Wsl2#limitations()}) */
    public Optional<Wsl2> wsl2() {
        return wsl;
    }

    /** @return the options NVML is opened with (on WSL2, the WSL library) */
    public NvmlOptions options() {
        return options;
    }

    @Override
    public String name() {
        return "nvml";
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Optional<String> unavailabilityCause() {
        Optional<String> cause = probe();
        if (wsl.isPresent() && cause.isPresent()) {
            // say what cannot work here up front, not when a job is fenced
            return Optional.of(wsl.get().describe() + "; NVML is unavailable: " + cause.get() + ". On WSL2 also: "
                    + String.join("; ", wsl.get().limitations()));
        }
        return cause; // available: on WSL2 with the limits of wsl2().limitations(), which doctor prints
    }

    private Optional<String> probe() {
        try (NvmlSession s = NvmlSession.open(options.library())) {
            return s.deviceCount() == 0 ? Optional.of("NVML reports no GPUs") : Optional.empty();
        } catch (NvmlBinding.NvmlLoadException e) {
            return Optional.of(e.getMessage());
        } catch (NvmlSession.NvmlCallException e) {
            return Optional.of(e.call().equals("nvmlInit_v2") ? describeInitFailure(e.code())
                    : "NVML initialized but " + e.getMessage());
        } catch (LinkageError e) {
            return Optional.of("JNA could not be loaded: " + e.getMessage());
        }
    }

    /** @return a one-line cause for a failed {@code nvmlInit_v2} */
    static String describeInitFailure(int code) {
        String nvml = NvmlReturn.describe(code);
        return switch (NvmlReturn.of(code)) {
            case ERROR_DRIVER_NOT_LOADED -> "driver not loaded (" + nvml + ")";
            case ERROR_NO_PERMISSION -> "no permission (" + nvml + ")";
            case ERROR_LIB_RM_VERSION_MISMATCH -> "driver and library versions differ (" + nvml + ")";
            case ERROR_LIBRARY_NOT_FOUND -> "library not found (" + nvml + ")";
            default -> "nvmlInit_v2 failed (" + nvml + ")";
        };
    }

    @Override
    public GpuInventory open(GpuConfig config) {
        return NvmlInventory.open(options);
    }
}
