package io.gpusched.core;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The one JSON shape of an allocation, wherever gpusched shows one: the console's and the node service's REST answers,
 * their event streams, {@code gpusched status --json}, {@code allocate --json}, {@code env --json}, and what the node
 * service's client ({@code gpusched-client}) reads back. Plain values, so a JSON document describes it field for field:
 * absent values are {@code null}, times are ISO-8601 text, memory is bytes. {@link #toMap()} gives the fields in this
 * order.
 *
 * <pre>
 * {"id": "a-1f2e", "owner": "alice", "ownerUid": 1001, "jobId": null, "devices": [0, 1],
 *  "uuids": ["GPU-…", "GPU-…"], "sharing": "EXCLUSIVE", "sharedMemoryBytes": null,
 *  "createdAt": "2026-11-22T10:00:00Z", "expiresAt": null, "expired": false, "holderPid": 4242,
 *  "labels": {}, "placement": "proven optimal"}
 * </pre>
 *
 * <p>Older names, kept for one release where users read them ({@code status --json}, {@code env --json}; see
 * {@link #OLD_NAMES}): {@code deviceIndices} (now {@code devices}) and {@code deviceUuids} (now {@code uuids}).
 *
 * @param id                the allocation's id
 * @param owner             who asked (a user name), or null
 * @param ownerUid          the owner's Unix uid where the kernel vouched for it (the node service), or null
 * @param jobId             the job it is for, or null
 * @param devices           the device indices, in the order the strategy chose them
 * @param uuids             the device UUIDs, in the same order
 * @param sharing           {@code EXCLUSIVE} or {@code SHARED}
 * @param sharedMemoryBytes memory reserved on each device when shared, or null
 * @param createdAt         when it was made
 * @param expiresAt         when its lease ends, or null for no lease
 * @param expired           whether its lease had ended when the view was taken
 * @param holderPid         the process it is bound to (reclaimed once that process is gone), or null
 * @param labels            the request's labels
 * @param placement         the strategy's certificate: {@code proven optimal}, {@code within X % of optimal (...)} or
 *                          {@code not rated}
 */
public record AllocationView(String id, String owner, Long ownerUid, String jobId, List<Integer> devices,
        List<String> uuids, String sharing, Long sharedMemoryBytes, String createdAt, String expiresAt,
        boolean expired, Long holderPid, Map<String, String> labels, String placement) {

    /** Names of an earlier release, each to its current name, still written where users may read them. */
    public static final Map<String, String> OLD_NAMES = Map.of("deviceIndices", "devices", "deviceUuids", "uuids");

    /**
     * Copies the collections.
     *
     * @throws NullPointerException when a required field (id, devices, uuids, sharing, createdAt, labels) is null
     * @throws IllegalArgumentException when devices and uuids differ in length
     */
    public AllocationView {
        Objects.requireNonNull(id, "id");
        devices = List.copyOf(devices);
        uuids = List.copyOf(uuids);
        Objects.requireNonNull(sharing, "sharing");
        Objects.requireNonNull(createdAt, "createdAt");
        labels = Collections.unmodifiableMap(new LinkedHashMap<>(labels));
        if (devices.size() != uuids.size()) {
            throw new IllegalArgumentException("allocation " + id + ": " + devices.size() + " devices but "
                    + uuids.size() + " uuids");
        }
    }

    /**
     * @param a   an allocation
     * @param now the time the view is taken (to say whether its lease has ended)
     * @return its view
     */
    public static AllocationView of(Allocation a, Instant now) {
        GpuRequest r = a.request();
        return new AllocationView(a.id(), r.owner().orElse(null),
                r.ownerUid().isPresent() ? r.ownerUid().getAsLong() : null, r.jobId().orElse(null),
                a.deviceIndices(), a.deviceUuids(), a.sharing().name(),
                a.sharedMemory().map(MemorySize::bytes).orElse(null), a.createdAt().toString(),
                a.expiresAt().map(Instant::toString).orElse(null),
                a.expiresAt().map(e -> !e.isAfter(now)).orElse(false),
                r.holder().map(HolderProcess::pid).orElse(null), r.labels(), a.placement().describe());
    }

    /**
     * @param allocations allocations
     * @param now         the time the views are taken
     * @return their views, in the same order
     */
    public static List<AllocationView> of(List<Allocation> allocations, Instant now) {
        List<AllocationView> out = new ArrayList<>(allocations.size());
        for (Allocation a : allocations) {
            out.add(of(a, now));
        }
        return out;
    }

    /** @return the fields, in the documented order, for a JSON writer */
    public Map<String, Object> toMap() {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("id", id);
        v.put("owner", owner);
        v.put("ownerUid", ownerUid);
        v.put("jobId", jobId);
        v.put("devices", devices);
        v.put("uuids", uuids);
        v.put("sharing", sharing);
        v.put("sharedMemoryBytes", sharedMemoryBytes);
        v.put("createdAt", createdAt);
        v.put("expiresAt", expiresAt);
        v.put("expired", expired);
        v.put("holderPid", holderPid);
        v.put("labels", labels);
        v.put("placement", placement);
        return v;
    }

    /** @return {@link #toMap()} followed by the {@link #OLD_NAMES} (for outputs that had them) */
    public Map<String, Object> toMapWithOldNames() {
        Map<String, Object> v = toMap();
        v.put("deviceIndices", devices);
        v.put("deviceUuids", uuids);
        return v;
    }

    /** @return whether the allocation is exclusive (not shared) */
    public boolean exclusive() {
        return !sharing.equals(SharingMode.SHARED.name());
    }
}
