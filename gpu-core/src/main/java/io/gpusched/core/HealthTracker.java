package io.gpusched.core;

import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Follows the inventory's health events for one scheduler. It registers its listener before it reads any device's
 * initial health, so a change that happens in between is not lost: a change heard before the scheduler is ready is
 * kept and wins over the initial reading. Health is a fact of this process's inventory, not written to the ledger.
 */
final class HealthTracker implements GpuHealthListener {
    private static final Logger LOG = LoggerFactory.getLogger(HealthTracker.class);

    private final GpuInventory inventory;
    private final Map<String, GpuHealth> heardEarly = new ConcurrentHashMap<>();
    private volatile Ledger ledger;
    private volatile Consumer<List<AllocationEvent>> events;
    private volatile Clock clock;

    HealthTracker(GpuInventory inventory) {
        this.inventory = inventory;
        inventory.addHealthListener(this);
    }

    /** @return each device idle, with its health: an early event wins over the initial reading */
    List<DeviceState> initialStates(List<GpuDevice> devices) {
        List<DeviceState> out = new ArrayList<>(devices.size());
        for (GpuDevice d : devices) {
            GpuHealth h;
            try {
                h = inventory.health(d);
            } catch (RuntimeException e) {
                LOG.warn("reading the health of GPU {} ({}) failed: {}", d.index(), d.uuid(), e.toString());
                h = GpuHealth.lost("health could not be read: " + e.getMessage());
            }
            GpuHealth early = heardEarly.get(d.uuid());
            out.add(DeviceState.idle(d, early != null ? early : h));
        }
        return out;
    }

    /** From now on, changes go to the ledger's state and events to {@code sink}. */
    void attach(Ledger l, Consumer<List<AllocationEvent>> sink, Clock c) {
        this.events = sink;
        this.clock = c;
        synchronized (this) {
            this.ledger = l;
            heardEarly.forEach((uuid, h) -> update(l, uuid, h));
            heardEarly.clear();
        }
    }

    @Override
    public void onHealthChange(GpuDevice device, GpuHealth health) {
        onHealthChange(device, health, device.uuid());
    }

    private void onHealthChange(GpuDevice device, GpuHealth health, String uuid) {
        List<AllocationEvent> out;
        synchronized (this) {
            Ledger l = ledger;
            if (l == null) {
                heardEarly.put(uuid, health);
                return;
            }
            out = update(l, uuid, health);
        }
        if (!out.isEmpty()) {
            events.accept(out);
        }
    }

    /** Caller holds this monitor. */
    private List<AllocationEvent> update(Ledger l, String uuid, GpuHealth health) {
        List<Allocation> affected = new ArrayList<>();
        int[] index = {-1};
        l.local(s -> {
            Integer p = s.positionOfUuid(uuid);
            if (p == null || s.state(p).health().equals(health)) {
                return;
            }
            s.set(p, s.state(p).withHealth(health));
            index[0] = s.state(p).index();
            for (Allocation a : s.live.values()) {
                if (a.deviceUuids().contains(uuid)) {
                    affected.add(a);
                }
            }
        });
        if (index[0] < 0) {
            return List.of();
        }
        LOG.warn("GPU {} ({}) is now {}", index[0], uuid, health);
        List<AllocationEvent> out = new ArrayList<>();
        for (Allocation a : affected) {
            out.add(new AllocationEvent(AllocationEvent.Type.HEALTH_CHANGED, clock.instant(), Optional.of(a.id()),
                    a.owner(), a.request().jobId(), List.of(uuid), Optional.empty(),
                    "GPU " + index[0] + " of allocation " + a.id() + " is now " + health));
        }
        if (affected.isEmpty()) {
            // an idle GPU's change is news too: a request waiting for it (or kept from others by it) may now be served
            // (review27: the node service's queue heard of no change and left requests waiting beside a healed GPU)
            out.add(new AllocationEvent(AllocationEvent.Type.HEALTH_CHANGED, clock.instant(), Optional.empty(),
                    Optional.empty(), Optional.empty(), List.of(uuid), Optional.empty(),
                    "GPU " + index[0] + " (no allocation holds it) is now " + health));
        }
        return out;
    }

    void close() {
        inventory.removeHealthListener(this);
    }
}
