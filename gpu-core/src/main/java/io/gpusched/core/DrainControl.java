package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.LedgerRecord.PoolChanged;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Draining and quarantine: a released device drains until its processes are gone, then returns to the pool, or is
 * quarantined when processes stay past {@code gpu.drain.timeout}. Transitions are ledger records, so every process
 * sees them. Drain needs an inventory that can list a device's processes; it is probed once, safely (a device that
 * fails to answer does not stop the scheduler from being built).
 */
final class DrainControl {
    private static final Logger LOG = LoggerFactory.getLogger(DrainControl.class);

    private final GpuInventory inventory;
    private final Duration timeout;
    private final boolean supported;

    DrainControl(GpuInventory inventory, Duration timeout) {
        this.inventory = inventory;
        this.timeout = timeout;
        this.supported = probe(inventory);
    }

    /**
     * Drain is a property of the backend, not of one GPU: supported when any device lists its processes. Healthy
     * devices are asked first; a lost or failing device (which a backend may answer with empty) does not decide it.
     */
    private static boolean probe(GpuInventory inventory) {
        List<GpuDevice> order = new java.util.ArrayList<>(inventory.devices());
        order.sort(java.util.Comparator.comparing(d -> !healthy(inventory, d)));
        for (GpuDevice d : order) {
            try {
                if (inventory.processes(d).isPresent()) {
                    return true;
                }
            } catch (RuntimeException e) {
                LOG.warn("listing the processes of GPU {} ({}) failed while probing for drain support: {}", d.index(),
                        d.uuid(), e.toString());
            }
        }
        return false;
    }

    private static boolean healthy(GpuInventory inventory, GpuDevice d) {
        try {
            return inventory.health(d).isHealthy();
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** @return whether released devices drain */
    boolean supported() {
        return supported;
    }

    /** @return the devices of {@code a} that drain when it is released */
    List<String> drainOf(Allocation a) {
        return supported ? a.deviceUuids() : List.of();
    }

    /** Moves each draining device on: back to the pool when its processes are gone, to quarantine after the timeout. */
    void maintain(Ledger ledger, Instant now) {
        List<DeviceState> draining = ledger.read(s -> s.snapshot().stream().filter(d -> d.pool() == Pool.DRAINING)
                .toList());
        for (DeviceState s : draining) {
            List<GpuProcess> left;
            try {
                left = inventory.processes(s.device()).orElse(List.of());
            } catch (RuntimeException e) {
                LOG.warn("listing processes of GPU {} ({}) failed: {}", s.index(), s.device().uuid(), e.toString());
                continue;
            }
            ledger.commit((state, seq) -> {
                Integer p = state.positionOfUuid(s.device().uuid());
                DeviceState cur = p == null ? null : state.state(p);
                if (cur == null || cur.pool() != Pool.DRAINING || !cur.poolSince().equals(s.poolSince())) {
                    return Ledger.Decision.of(null);
                }
                if (left.isEmpty()) {
                    return Ledger.Decision.of(null, new PoolChanged(cur.device().uuid(), Pool.IN_POOL,
                            Optional.of("no process left"), Optional.of(now)));
                }
                if (!cur.poolSince().orElse(now).plus(timeout).isAfter(now)) {
                    String reason = left.stream().map(pr -> "pid " + pr.pid() + pr.usedMemory()
                            .map(m -> " still holds " + m.toHumanString()).orElse(" is still running"))
                            .collect(Collectors.joining(", "));
                    return Ledger.Decision.of(null, new PoolChanged(cur.device().uuid(), Pool.QUARANTINED,
                            Optional.of(reason), Optional.of(now)));
                }
                return Ledger.Decision.of(null);
            });
        }
    }
}
