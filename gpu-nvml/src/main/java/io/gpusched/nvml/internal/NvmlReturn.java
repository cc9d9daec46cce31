package io.gpusched.nvml.internal;

/** NVML's return codes ({@code nvmlReturn_t}) with NVML's own messages, as in {@code nvml.h}. Internal. */
public enum NvmlReturn {
    /** The operation was successful */
    SUCCESS(0, "The operation was successful"),
    /** NVML was not first initialized with nvmlInit() */
    ERROR_UNINITIALIZED(1, "NVML was not first initialized with nvmlInit()"),
    /** A supplied argument is invalid */
    ERROR_INVALID_ARGUMENT(2, "A supplied argument is invalid"),
    /** The requested operation is not available on target device */
    ERROR_NOT_SUPPORTED(3, "The requested operation is not available on target device"),
    /** The current user does not have permission for operation */
    ERROR_NO_PERMISSION(4, "The current user does not have permission for operation"),
    /** Deprecated: Multiple initializations are now allowed through ref counting */
    ERROR_ALREADY_INITIALIZED(5, "Deprecated: Multiple initializations are now allowed through ref counting"),
    /** A query to find an object was unsuccessful */
    ERROR_NOT_FOUND(6, "A query to find an object was unsuccessful"),
    /** An input argument is not large enough */
    ERROR_INSUFFICIENT_SIZE(7, "An input argument is not large enough"),
    /** A device's external power cables are not properly attached */
    ERROR_INSUFFICIENT_POWER(8, "A device's external power cables are not properly attached"),
    /** NVIDIA driver is not loaded */
    ERROR_DRIVER_NOT_LOADED(9, "NVIDIA driver is not loaded"),
    /** User provided timeout passed */
    ERROR_TIMEOUT(10, "User provided timeout passed"),
    /** NVIDIA Kernel detected an interrupt issue with a GPU */
    ERROR_IRQ_ISSUE(11, "NVIDIA Kernel detected an interrupt issue with a GPU"),
    /** NVML Shared Library couldn't be found or loaded */
    ERROR_LIBRARY_NOT_FOUND(12, "NVML Shared Library couldn't be found or loaded"),
    /** Local version of NVML doesn't implement this function */
    ERROR_FUNCTION_NOT_FOUND(13, "Local version of NVML doesn't implement this function"),
    /** infoROM is corrupted */
    ERROR_CORRUPTED_INFOROM(14, "infoROM is corrupted"),
    /** The GPU has fallen off the bus or has otherwise become inaccessible */
    ERROR_GPU_IS_LOST(15, "The GPU has fallen off the bus or has otherwise become inaccessible"),
    /** The GPU requires a reset before it can be used again */
    ERROR_RESET_REQUIRED(16, "The GPU requires a reset before it can be used again"),
    /** The GPU control device has been blocked by the operating system/cgroups */
    ERROR_OPERATING_SYSTEM(17, "The GPU control device has been blocked by the operating system/cgroups"),
    /** RM detects a driver/library version mismatch */
    ERROR_LIB_RM_VERSION_MISMATCH(18, "RM detects a driver/library version mismatch"),
    /** An operation cannot be performed because the GPU is currently in use */
    ERROR_IN_USE(19, "An operation cannot be performed because the GPU is currently in use"),
    /** Insufficient memory */
    ERROR_MEMORY(20, "Insufficient memory"),
    /** No data */
    ERROR_NO_DATA(21, "No data"),
    /** The requested vgpu operation is not available on target device, because ECC is enabled */
    ERROR_VGPU_ECC_NOT_SUPPORTED(22,
            "The requested vgpu operation is not available on target device, because ECC is enabled"),
    /** Ran out of critical resources, other than memory */
    ERROR_INSUFFICIENT_RESOURCES(23, "Ran out of critical resources, other than memory"),
    /** Ran out of critical resources, other than memory */
    ERROR_FREQ_NOT_SUPPORTED(24, "Ran out of critical resources, other than memory"),
    /** The provided version is invalid/unsupported */
    ERROR_ARGUMENT_VERSION_MISMATCH(25, "The provided version is invalid/unsupported"),
    /** An internal driver error occurred */
    ERROR_UNKNOWN(999, "An internal driver error occurred");

    private final int code;
    private final String message;

    NvmlReturn(int code, String message) {
        this.code = code;
        this.message = message;
    }

    /** @return the numeric code */
    public int code() {
        return code;
    }

    /** @return NVML's message for it */
    public String message() {
        return message;
    }

    /** @return the constant for a code; {@link #ERROR_UNKNOWN} for codes this build does not know */
    public static NvmlReturn of(int code) {
        for (NvmlReturn r : values()) {
            if (r.code == code) {
                return r;
            }
        }
        return ERROR_UNKNOWN;
    }

    /** @return {@code "NVML 9: NVIDIA driver is not loaded"} */
    public static String describe(int code) {
        NvmlReturn r = of(code);
        return "NVML " + code + ": " + (r == ERROR_UNKNOWN && code != 999 ? "unknown return code" : r.message);
    }
}
