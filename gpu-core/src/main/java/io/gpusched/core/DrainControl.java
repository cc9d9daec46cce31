package io.gpusched.core;

import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.LedgerRecord.PoolChanged;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Draining and quarantine: a released device drains until its processes are gone, then returns to the pool, or is
 * quarantined when processes stay past {@code gpu.drain.timeout}. Transitions are ledger records, so every process
 * sees them. Drain needs an inventory that can list a device's processes; it is probed safely (a device that fails to
 * answer does not stop the scheduler from being built). The probe decides once a device lists its processes (drain
 * on) or a healthy device answers that it cannot (drain off); while every device is sick or failing it stays
 * undecided (drain off for now) and {@link #maintain} and every release probe again, so a node built while its GPUs
 * were lost gains drain when one comes back, before that GPU's first job is released.
 */
final class DrainControl {
    private static final Logger LOG = LoggerFactory.getLogger(DrainControl.class);

    private final GpuInventory inventory;
    private final Duration timeout;
    /** TRUE or FALSE once decided; null while no device could decide it. */
    private volatile Boolean supported;

    DrainControl(GpuInventory inventory, Duration timeout) {
        this.inventory = inventory;
        this.timeout = timeout;
        this.supported = probe(inventory, inventory.devices());
    }

    /**
     * Drain is a property of the backend, not of one GPU: supported when any device lists its processes, not
     * supported when a healthy device answers that it cannot list them. Healthy devices are asked first; a lost or
     * failing device (which a backend may answer with empty) does not decide it.
     *
     * @param devices the devices to ask (all of the node's, or those of one allocation)
     * @return TRUE, FALSE, or null when every device was sick or failed to answer
     */
    private static Boolean probe(GpuInventory inventory, List<GpuDevice> devices) {
        List<GpuDevice> order = new ArrayList<>(devices);
        boolean[] well = new boolean[order.size()];
        for (int i = 0; i < well.length; i++) {
            well[i] = healthy(inventory, order.get(i));
        }
        boolean healthyAnsweredEmpty = false;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < well.length; i++) {
                if (well[i] != (pass == 0)) {
                    continue;
                }
                GpuDevice d = order.get(i);
                try {
                    if (inventory.processes(d).isPresent()) {
                        return Boolean.TRUE;
                    }
                    healthyAnsweredEmpty |= well[i];
                } catch (RuntimeException e) {
                    LOG.warn("listing the processes of GPU {} ({}) failed while probing for drain support: {}",
                            d.index(), d.uuid(), e.toString());
                }
            }
        }
        return healthyAnsweredEmpty || order.isEmpty() ? Boolean.FALSE : null;
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
        return Boolean.TRUE.equals(supported);
    }

    /** @return whether the probe has decided (false while every device was sick or failing) */
    boolean decided() {
        return supported != null;
    }

    /** @return the devices of {@code a} that drain when it is released */
    List<String> drainOf(Allocation a) {
        return Boolean.TRUE.equals(supported) ? a.deviceUuids() : List.of();
    }

    /**
     * While undecided, probes {@code devices} again (a GPU may have come back since): the scheduler calls it with the
     * devices of an allocation before releasing it, so a GPU that came back is not returned to the pool with its job's
     * processes still on it for want of a maintenance run. A volatile read once decided.
     */
    void decideIfUndecided(List<GpuDevice> devices) {
        if (supported == null && !devices.isEmpty()) {
            Boolean again = probe(inventory, devices);
            if (again != null) {
                supported = again;
                LOG.info("drain support decided once a GPU answered: {}", again ? "released GPUs drain" : "no drain");
            }
        }
    }

    /** Moves each draining device on: back to the pool when its processes are gone, to quarantine after the timeout. */
    void maintain(Ledger ledger, Instant now) {
        decideIfUndecided(inventory.devices());
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
