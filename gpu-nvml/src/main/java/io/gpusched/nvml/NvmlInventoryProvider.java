package io.gpusched.nvml;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuInventoryProvider;
import io.gpusched.nvml.internal.NvmlBinding;
import io.gpusched.nvml.internal.NvmlReturn;
import io.gpusched.nvml.internal.NvmlSession;
import java.util.Optional;

/** The NVML backend: highest priority for NVIDIA GPUs. Probing loads NVML and calls {@code nvmlInit_v2} once. */
public final class NvmlInventoryProvider implements GpuInventoryProvider {

    /** Priority: above the procfs (50) and nvidia-smi (30) fallbacks. */
    public static final int PRIORITY = 100;

    private final NvmlOptions options;

    /** With {@link NvmlOptions#defaults()} (ServiceLoader). */
    public NvmlInventoryProvider() {
        this(NvmlOptions.defaults());
    }

    /** @param options settings */
    public NvmlInventoryProvider(NvmlOptions options) {
        this.options = options;
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
