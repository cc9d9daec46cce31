package io.gpusched.core;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes one structured line per event: {@code event=ALLOCATED id=… owner=… job=… uuids=[…] reason=… msg="…"}
 * ({@code uuids}: the GPUs' UUIDs, as the allocation's JSON shape names them; earlier snapshots said {@code devices}).
 */
final class Slf4jAllocationListener implements AllocationListener {
    static final Slf4jAllocationListener INSTANCE = new Slf4jAllocationListener();
    private static final Logger LOG = LoggerFactory.getLogger("io.gpusched.audit");

    private Slf4jAllocationListener() {
    }

    @Override
    public void onEvent(AllocationEvent e) {
        if (e.type() == AllocationEvent.Type.REJECTED || e.type() == AllocationEvent.Type.HEALTH_CHANGED) {
            if (LOG.isWarnEnabled()) {
                LOG.warn(format(e));
            }
        } else if (LOG.isInfoEnabled()) {
            LOG.info(format(e));
        }
    }

    static String format(AllocationEvent e) {
        return "event=" + e.type()
                + " at=" + e.at()
                + " id=" + e.allocationId().orElse("-")
                + " owner=" + e.owner().orElse("-")
                + " job=" + e.jobId().orElse("-")
                + " uuids=" + e.deviceUuids()
                + " reason=" + e.reason().map(Enum::name).orElse("-")
                + " msg=\"" + e.message().replace("\"", "'") + "\"";
    }
}
