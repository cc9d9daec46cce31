package io.gpusched.nvml.internal;

import com.sun.jna.Memory;
import io.gpusched.nvml.internal.NvmlBinding.Fn;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An NVML event set watching XID critical errors. Not thread-safe; one watcher thread uses it, and frees it
 * ({@link #close()}) before the session shuts down. Internal.
 */
public final class NvmlEventWatch implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlEventWatch.class);

    private final long set;
    private final Memory data = new Memory(NvmlLayout.EVENT_SIZE);
    private final long dataAddr = NvmlSession.addr(data);
    private final List<Long> registered = new ArrayList<>();
    private final Map<Long, NvmlSession.Fault> faults = new LinkedHashMap<>();

    /**
     * @param session the open session whose library is used
     * @param devices GPU handles to watch (physical GPUs, not MIG devices; 0 entries are skipped)
     * @throws NvmlSession.NvmlCallException when the event set cannot be created
     */
    public NvmlEventWatch(NvmlSession session, long[] devices) {
        if (!session.binding().has(Fn.EVENTS)) {
            throw new NvmlSession.NvmlCallException("nvmlEventSetCreate (absent from this driver)",
                    NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code());
        }
        Memory out = new Memory(8);
        NvmlSession.check("nvmlEventSetCreate", NvmlBinding.Events.nvmlEventSetCreate(NvmlSession.addr(out)));
        this.set = out.getLong(0);
        Memory types = new Memory(8);
        for (long d : devices) {
            if (d == 0) {
                continue;
            }
            types.setLong(0, 0);
            int rc = NvmlBinding.Events.nvmlDeviceGetSupportedEventTypes(d, NvmlSession.addr(types));
            if (rc != 0) {
                if (!NvmlSession.benign(rc)) {
                    faults.put(d, new NvmlSession.Fault("nvmlDeviceGetSupportedEventTypes", rc));
                }
                continue;
            }
            long mask = types.getLong(0) & NvmlLayout.EVENT_TYPE_XID;
            if (mask == 0) {
                continue;
            }
            rc = NvmlBinding.Events.nvmlDeviceRegisterEvents(d, mask, set);
            if (rc == 0) {
                registered.add(d);
            } else if (!NvmlSession.benign(rc)) {
                faults.put(d, new NvmlSession.Fault("nvmlDeviceRegisterEvents", rc));
            }
        }
    }

    /** @return how many GPUs have XID events registered */
    public int registeredCount() {
        return registered.size();
    }

    /** @return per GPU handle, a registration call that failed with a fault */
    public Map<Long, NvmlSession.Fault> faults() {
        return faults;
    }

    /**
     * Waits for one event.
     *
     * @return NVML's code: 0 with {@link #lastDevice()} etc. filled, 10 on timeout, 15 when a GPU is lost
     */
    public int await(int timeoutMs) {
        return NvmlBinding.Events.nvmlEventSetWait_v2(set, dataAddr, timeoutMs);
    }

    /** @return the device handle of the last event */
    public long lastDevice() {
        return data.getLong(NvmlLayout.EVENT_DEVICE);
    }

    /** @return the event type mask of the last event */
    public long lastType() {
        return data.getLong(NvmlLayout.EVENT_TYPE);
    }

    /** @return the XID of the last event */
    public long lastData() {
        return data.getLong(NvmlLayout.EVENT_DATA);
    }

    /** @return the GPU instance id of the last event, 0xFFFFFFFF when not attributable */
    public long lastGpuInstance() {
        return data.getInt(NvmlLayout.EVENT_GPU_INSTANCE) & 0xFFFFFFFFL;
    }

    /** @return the compute instance id of the last event, 0xFFFFFFFF when not attributable */
    public long lastComputeInstance() {
        return data.getInt(NvmlLayout.EVENT_COMPUTE_INSTANCE) & 0xFFFFFFFFL;
    }

    /** Frees the event set ({@code nvmlEventSetFree}); a failure is logged. */
    @Override
    public void close() {
        int rc = NvmlBinding.Events.nvmlEventSetFree(set);
        if (rc != 0) {
            LOG.debug("nvmlEventSetFree: {}", NvmlReturn.describe(rc));
        }
    }
}
