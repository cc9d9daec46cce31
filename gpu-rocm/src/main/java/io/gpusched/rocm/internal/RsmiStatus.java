package io.gpusched.rocm.internal;

/** {@code rsmi_status_t}, in the order of {@code rocm_smi.h}. Internal. */
public enum RsmiStatus {
    RSMI_STATUS_SUCCESS(0), RSMI_STATUS_INVALID_ARGS(1), RSMI_STATUS_NOT_SUPPORTED(2), RSMI_STATUS_FILE_ERROR(3),
    RSMI_STATUS_PERMISSION(4), RSMI_STATUS_OUT_OF_RESOURCES(5), RSMI_STATUS_INTERNAL_EXCEPTION(6),
    RSMI_STATUS_INPUT_OUT_OF_BOUNDS(7), RSMI_STATUS_INIT_ERROR(8), RSMI_STATUS_NOT_YET_IMPLEMENTED(9),
    RSMI_STATUS_NOT_FOUND(10), RSMI_STATUS_INSUFFICIENT_SIZE(11), RSMI_STATUS_INTERRUPT(12),
    RSMI_STATUS_UNEXPECTED_SIZE(13), RSMI_STATUS_NO_DATA(14), RSMI_STATUS_UNEXPECTED_DATA(15), RSMI_STATUS_BUSY(16),
    RSMI_STATUS_REFCOUNT_OVERFLOW(17), RSMI_STATUS_UNKNOWN_ERROR(0xFFFFFFFF);

    private final int code;

    RsmiStatus(int code) {
        this.code = code;
    }

    /** @return the numeric code */
    public int code() {
        return code;
    }

    /** @return the constant for a code; unknown codes read as {@link #RSMI_STATUS_UNKNOWN_ERROR} */
    public static RsmiStatus of(int code) {
        for (RsmiStatus s : values()) {
            if (s.code == code) {
                return s;
            }
        }
        return RSMI_STATUS_UNKNOWN_ERROR;
    }

    @Override
    public String toString() {
        return name() + " (" + (code == 0xFFFFFFFF ? "0xFFFFFFFF" : String.valueOf(code)) + ")";
    }
}
