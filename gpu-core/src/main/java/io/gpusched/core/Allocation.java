package io.gpusched.core;

import java.time.Instant;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Devices handed to one request. Immutable; released through {@link GpuScheduler#release(String)}.
 *
 * @param id        scheduler-issued id
 * @param devices   the devices, in the order the strategy chose them
 * @param request   what was asked
 * @param createdAt when the allocation was made (scheduler clock)
 * @param expiresAt when its lease ends, for requests with a {@code maxDuration}
 * @param placement how good the strategy could prove its choice to be (proven optimal, within X %, or not rated);
 *                  for the snapshot the choice was made on, and as recorded in the node ledger
 */
public record Allocation(String id, List<GpuDevice> devices, GpuRequest request, Instant createdAt,
        Optional<Instant> expiresAt, PlacementQuality placement) {

    /** An allocation without a lease, not rated. */
    public Allocation(String id, List<GpuDevice> devices, GpuRequest request, Instant createdAt) {
        this(id, devices, request, createdAt, Optional.empty());
    }

    /** An allocation whose placement is not rated. */
    public Allocation(String id, List<GpuDevice> devices, GpuRequest request, Instant createdAt,
            Optional<Instant> expiresAt) {
        this(id, devices, request, createdAt, expiresAt, PlacementQuality.unrated());
    }

    /** Copies the list. */
    public Allocation {
        Objects.requireNonNull(id, "id");
        devices = List.copyOf(devices);
        Objects.requireNonNull(request, "request");
        Objects.requireNonNull(createdAt, "createdAt");
        Objects.requireNonNull(expiresAt, "expiresAt");
        Objects.requireNonNull(placement, "placement");
    }

    /** @return a copy with another lease end */
    public Allocation withExpiry(Optional<Instant> at) {
        return new Allocation(id, devices, request, createdAt, at, placement);
    }

    /** @return the device indices */
    public List<Integer> deviceIndices() {
        Integer[] out = new Integer[devices.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = devices.get(i).index();
        }
        return Collections.unmodifiableList(Arrays.asList(out)); // contains(null) is false
    }

    /** @return the device UUIDs */
    public List<String> deviceUuids() {
        String[] out = new String[devices.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = devices.get(i).uuid();
        }
        return Collections.unmodifiableList(Arrays.asList(out)); // contains(null) is false
    }

    /** @return exclusive or shared */
    public SharingMode sharing() {
        return request.sharing();
    }

    /** @return memory reserved on each device when shared */
    public Optional<MemorySize> sharedMemory() {
        return request.sharedMemory();
    }

    /** @return the owner, if the request named one */
    public Optional<String> owner() {
        return request.owner();
    }

    @Override
    public String toString() {
        return "Allocation[" + id + " " + sharing() + " " + deviceIndices()
                + sharedMemory().map(m -> " " + m.toHumanString() + " each").orElse("")
                + owner().map(o -> " owner " + o).orElse("") + "]";
    }
}
