package io.gpusched.nvml.internal;

/**
 * Byte offsets and sizes of the NVML structs the binding reads, exactly as {@code nvml.h} lays them out on LP64.
 * The native-fake test checks each against {@code sizeof}/{@code offsetof} of the real header. Internal.
 */
public final class NvmlLayout {
    private NvmlLayout() {
    }

    /** {@code nvmlPciInfo_t}: busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId, busId[32]. */
    public static final int PCI_SIZE = 68;
    public static final int PCI_DOMAIN = 16;
    public static final int PCI_BUS = 20;
    public static final int PCI_DEVICE = 24;
    public static final int PCI_DEVICE_ID = 28;
    public static final int PCI_BUS_ID = 36;
    public static final int PCI_BUS_ID_LENGTH = 32;

    /** {@code nvmlMemory_t}: total, free, used (unsigned long long). */
    public static final int MEMORY_SIZE = 24;
    public static final int MEMORY_TOTAL = 0;
    public static final int MEMORY_USED = 16;

    /** {@code nvmlMemory_v2_t}: version (uint, then 4 bytes padding), total, reserved, free, used. */
    public static final int MEMORY_V2_SIZE = 40;
    public static final int MEMORY_V2_VERSION_FIELD = 0;
    public static final int MEMORY_V2_TOTAL = 8;
    public static final int MEMORY_V2_USED = 32;
    /** {@code NVML_STRUCT_VERSION(Memory, 2)} = sizeof | 2 &lt;&lt; 24. */
    public static final int MEMORY_V2_VERSION = 0x02000028;

    /** {@code nvmlUtilization_t}: gpu, memory (uint). */
    public static final int UTILIZATION_SIZE = 8;
    public static final int UTILIZATION_GPU = 0;

    /** {@code nvmlEventData_t}: device (pointer), eventType, eventData (ull), gpuInstanceId, computeInstanceId. */
    public static final int EVENT_SIZE = 32;
    public static final int EVENT_DEVICE = 0;
    public static final int EVENT_TYPE = 8;
    public static final int EVENT_DATA = 16;
    public static final int EVENT_GPU_INSTANCE = 24;
    public static final int EVENT_COMPUTE_INSTANCE = 28;

    /**
     * {@code nvmlProcessInfo_t} (v2 layout, used by the _v3 call): pid, usedGpuMemory, gpuInstanceId,
     * computeInstanceId.
     */
    public static final int PROCESS_SIZE = 24;
    public static final int PROCESS_PID = 0;
    public static final int PROCESS_USED_MEMORY = 8;
    public static final int PROCESS_GPU_INSTANCE = 16;
    public static final int PROCESS_COMPUTE_INSTANCE = 20;

    /**
     * {@code nvmlProcessUtilizationSample_t}: pid (uint, then 4 bytes padding), timeStamp (ull, µs), smUtil, memUtil,
     * encUtil, decUtil (uint).
     */
    public static final int PROCESS_UTIL_SIZE = 32;
    public static final int PROCESS_UTIL_PID = 0;
    public static final int PROCESS_UTIL_TIMESTAMP = 8;
    public static final int PROCESS_UTIL_SM = 16;

    /** {@code nvmlEventTypeXidCriticalError}. */
    public static final long EVENT_TYPE_XID = 0x8L;
    /**
     * {@code NVML_NVLINK_MAX_LINKS} of the header this was written against (18); links past a driver's count are
     * refused.
     */
    public static final int NVLINK_MAX_LINKS = 18;
    /** {@code NVML_NVLINK_DEVICE_TYPE_SWITCH}. */
    public static final int NVLINK_DEVICE_TYPE_SWITCH = 2;
    /** {@code NVML_NVLINK_DEVICE_TYPE_GPU}. */
    public static final int NVLINK_DEVICE_TYPE_GPU = 0;
    /** {@code NVML_TEMPERATURE_GPU}. */
    public static final int TEMPERATURE_GPU = 0;
    /** Buffer large enough for UUIDs, names, serials and driver versions ({@code NVML_DEVICE_UUID_V2_BUFFER_SIZE}). */
    public static final int STRING_BUFFER = 96;
    /** {@code NVML_VALUE_NOT_AVAILABLE} as an unsigned long long. */
    public static final long VALUE_NOT_AVAILABLE = -1L;
}
