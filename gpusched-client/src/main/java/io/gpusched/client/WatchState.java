package io.gpusched.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a watch through the service knows of the node, built from its event stream as the console's page builds it
 * ({@code web/app.js}): the {@code state} event's devices and allocations (plus the REST pages its {@code truncated}
 * marker names), each {@code delta} applied (changed devices, allocations upserted or removed; every item whole, so
 * applying one twice gives the same state), each {@code tick}'s metrics; a device's holders are the allocations that
 * hold it. What the stream may make it keep is bounded: no device the state did not list, no allocation on such a
 * device, and at most the client's answer limit ({@code maxBytes}, the bytes of the allocations' JSON) of
 * allocations; past either the watch ends with a {@link NodeServiceException} rather than keep more.
 */
final class WatchState {
    private final Path socket;
    private final long maxBytes;
    private final Map<Integer, DeviceView> devices = new LinkedHashMap<>();
    private final Map<String, Held> allocations = new LinkedHashMap<>();
    private long bytes;
    private boolean started;

    /** An allocation and the bytes of the JSON it came in. */
    private record Held(AllocationView view, long bytes) {
    }

    WatchState(Path socket, long maxBytes) {
        this.socket = socket;
        this.maxBytes = maxBytes;
    }

    /** @return whether a state event came (frames come only after it) */
    boolean started() {
        return started;
    }

    /**
     * Starts over from a {@code state} event.
     *
     * @return the target of its {@code truncated.rest} (the REST page where the allocations it left out start), or
     *     null when it carries them all
     */
    String state(Replies r, JsonNode data) {
        JsonNode o = r.json().object(data, "a state event");
        devices.clear();
        allocations.clear();
        bytes = 0;
        for (DeviceView d : r.devices(o.get("devices"))) {
            if (devices.put(d.index(), withoutHolders(d)) != null) {
                throw r.json().bad("a state event that lists GPU " + d.index() + " twice");
            }
        }
        for (JsonNode a : r.json().array(o.get("allocations"), "\"allocations\" of a state event")) {
            upsert(r, a);
        }
        started = true;
        JsonNode t = o.get("truncated");
        if (t == null || t.isNull()) {
            return null;
        }
        return r.json().text(r.json().object(t, "\"truncated\" of a state event"), "rest");
    }

    /** Adds what a page of the rest of the state lists (each allocation the stream does not have yet). */
    void rest(Replies r, List<AllocationView> page) {
        for (AllocationView a : page) {
            if (!allocations.containsKey(a.id())) {
                put(r, a, estimate(a));
            }
        }
    }

    /** Applies a {@code delta} event. */
    void delta(Replies r, JsonNode data) {
        JsonNode o = r.json().object(data, "a delta event");
        List<DeviceView> changed = r.devices(o.get("devices"));
        JsonNode a = r.json().object(o.get("allocations"), "\"allocations\" of a delta event");
        List<JsonNode> upsert = r.json().array(a.get("upsert"), "\"upsert\" of a delta event");
        List<String> remove = r.json().texts(a, "remove", true);
        for (DeviceView d : changed) {
            if (!devices.containsKey(d.index())) {
                throw r.json().bad("a delta event for GPU " + d.index() + ", which the state event did not list"
                        + " (it listed " + devices.keySet() + ")");
            }
        }
        for (DeviceView d : changed) {
            devices.put(d.index(), withoutHolders(d));
        }
        for (String id : remove) {
            Held h = allocations.remove(id);
            if (h != null) {
                bytes -= h.bytes();
            }
        }
        for (JsonNode n : upsert) {
            upsert(r, n);
        }
    }

    /** Applies a {@code tick} event's metrics (a GPU the state did not list is not one of the node's: left out). */
    void tick(Replies r, JsonNode data) {
        JsonNode o = r.json().object(data, "a tick event");
        for (JsonNode p : r.json().array(o.get("points"), "\"points\"")) {
            int gpu = r.json().int32(p, "gpu", 0, Integer.MAX_VALUE);
            JsonNode pt = r.json().object(p.get("point"), "\"point\"");
            DeviceView d = devices.get(gpu);
            if (d != null) {
                devices.put(gpu, new DeviceView(d.index(), d.uuid(), d.name(), d.vendor(), d.pciBusId(),
                        d.memoryTotalBytes(), r.json().integerOrNull(pt, "memUsed"), r.json().numberOrNull(pt,
                                "util"),
                        r.json().numberOrNull(pt, "temp"), r.json().numberOrNull(pt, "power"),
                        d.health(), d.healthReason(), d.pool(), d.poolReason(), d.reservableBytes(), List.of()));
            }
        }
    }

    /** @return the devices, each with the allocations holding it (in the order they came) */
    List<DeviceView> devices() {
        List<DeviceView> out = new ArrayList<>();
        for (DeviceView d : devices.values()) {
            List<AllocationView> holders = new ArrayList<>();
            for (Held h : allocations.values()) {
                if (h.view().devices().contains(d.index())) {
                    holders.add(h.view());
                }
            }
            out.add(new DeviceView(d.index(), d.uuid(), d.name(), d.vendor(), d.pciBusId(), d.memoryTotalBytes(),
                    d.memoryUsedBytes(), d.utilizationPercent(), d.temperatureCelsius(), d.powerWatts(), d.health(),
                    d.healthReason(), d.pool(), d.poolReason(), d.reservableBytes(), holders));
        }
        return out;
    }

    /** @return how many allocations it keeps */
    int allocationCount() {
        return allocations.size();
    }

    private void upsert(Replies r, JsonNode n) {
        AllocationView a = r.allocation(n);
        put(r, a, n.toString().length() + 1L);
    }

    private void put(Replies r, AllocationView a, long size) {
        for (int index : a.devices()) {
            if (!devices.containsKey(index)) {
                throw r.json().bad("allocation " + Answer.show(a.id()) + " on GPU " + index + ", which the state"
                        + " event did not list (it listed " + devices.keySet() + ")");
            }
        }
        Held before = allocations.put(a.id(), new Held(a, size));
        bytes += size - (before == null ? 0 : before.bytes());
        if (bytes > maxBytes) {
            throw new NodeServiceException(NodeServiceException.Kind.ANSWER_TOO_LARGE, socket, 200,
                    "ANSWER_TOO_LARGE", "the node service on " + socket + " streamed more allocations than the"
                            + " client's limit of " + maxBytes + " bytes (" + allocations.size() + " allocations)"
                            + " to a watch (ServiceClient.Builder.maxAnswerBytes)",
                    null);
        }
    }

    /** @return the bytes of an allocation's JSON (for one read from a page, whose JSON is not kept) */
    private static long estimate(AllocationView a) {
        return Json.MAPPER.valueToTree(a.toMap()).toString().length() + 1L;
    }

    private static DeviceView withoutHolders(DeviceView d) {
        return d.holders().isEmpty() ? d : new DeviceView(d.index(), d.uuid(), d.name(), d.vendor(), d.pciBusId(),
                d.memoryTotalBytes(), d.memoryUsedBytes(), d.utilizationPercent(), d.temperatureCelsius(),
                d.powerWatts(), d.health(), d.healthReason(), d.pool(), d.poolReason(), d.reservableBytes(),
                List.of());
    }
}
