package io.gpusched.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuMetrics;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** The JSON shapes of the API and the page, built from the library's values. */
final class Views {
    static final ObjectMapper MAPPER = new ObjectMapper()
            .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);

    private Views() {
    }

    static String json(Object o) {
        try {
            return MAPPER.writeValueAsString(o);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Longest text field the console sends (an owner, a job id, a label's key or value), in characters. */
    static final int MAX_FIELD = 256;
    /** Most labels of one allocation the console sends. */
    static final int MAX_LABELS = 32;
    /** Most holders of one device listed in a device view ({@code holdersTotal} counts them all). */
    static final int MAX_HOLDERS = 64;

    /**
     * @return {@code s} when it is at most {@value #MAX_FIELD} characters, else its first {@value #MAX_FIELD}
     *     followed by {@code "…(+N)"}, N the characters left out: whatever the ledger holds, the console's answers and
     *     events stay bounded
     */
    static String bounded(String s) {
        if (s.length() <= MAX_FIELD) {
            return s;
        }
        int end = Character.isHighSurrogate(s.charAt(MAX_FIELD - 1)) ? MAX_FIELD - 1 : MAX_FIELD;
        return s.substring(0, end) + "\u2026(+" + (s.length() - end) + ")";
    }

    /** @return at most {@value #MAX_LABELS} labels, each key and value {@link #bounded}, in their order */
    static Map<String, String> labels(Map<String, String> labels) {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : labels.entrySet()) {
            if (out.size() == MAX_LABELS) {
                break;
            }
            out.put(bounded(e.getKey()), bounded(e.getValue()));
        }
        return out;
    }

    static List<Map<String, Object>> devices(List<DeviceState> devices, List<Allocation> allocations) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (DeviceState d : devices) {
            GpuDevice g = d.device();
            Optional<GpuMetrics> m = d.metrics();
            Map<String, Object> v = new LinkedHashMap<>();
            v.put("index", d.index());
            v.put("uuid", g.uuid());
            v.put("name", g.name());
            v.put("vendor", g.vendor().name());
            v.put("pciBusId", g.pciBusId());
            v.put("memoryTotalBytes", g.memoryKnown() ? g.memory().bytes() : null);
            v.put("memoryUsedBytes", m.flatMap(GpuMetrics::memoryUsed).map(x -> x.bytes()).orElse(null));
            v.put("utilizationPercent", m.filter(x -> x.utilizationPercent().isPresent())
                    .map(x -> x.utilizationPercent().getAsDouble()).orElse(null));
            v.put("temperatureCelsius", m.filter(x -> x.temperatureCelsius().isPresent())
                    .map(x -> x.temperatureCelsius().getAsDouble()).orElse(null));
            v.put("powerWatts", m.filter(x -> x.powerWatts().isPresent()).map(x -> x.powerWatts().getAsDouble())
                    .orElse(null));
            v.put("health", d.health().state().name());
            v.put("healthReason", d.health().reason().orElse(null));
            v.put("pool", d.pool().name());
            v.put("poolReason", d.poolReason().orElse(null));
            List<Map<String, Object>> holders = new ArrayList<>();
            int total = 0;
            for (Allocation a : allocations) {
                if (a.deviceIndices().contains(d.index())) {
                    if (holders.size() < MAX_HOLDERS) {
                        holders.add(allocation(a));
                    }
                    total++;
                }
            }
            v.put("holders", holders);
            v.put("holdersTotal", total);
            out.add(v);
        }
        return out;
    }

    static List<Map<String, Object>> allocations(List<Allocation> allocations) {
        return allocations.stream().map(Views::allocation).toList();
    }

    static Map<String, Object> allocation(Allocation a) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("id", a.id());
        v.put("owner", a.owner().map(Views::bounded).orElse(null));
        v.put("ownerUid", a.request().ownerUid().isPresent() ? a.request().ownerUid().getAsLong() : null);
        v.put("jobId", a.request().jobId().map(Views::bounded).orElse(null));
        v.put("devices", a.deviceIndices());
        v.put("uuids", a.deviceUuids());
        v.put("sharing", a.sharing().name());
        v.put("sharedMemoryBytes", a.sharedMemory().map(x -> x.bytes()).orElse(null));
        v.put("createdAt", a.createdAt().toString());
        v.put("expiresAt", a.expiresAt().map(Object::toString).orElse(null));
        v.put("holderPid", a.request().holder().map(h -> h.pid()).orElse(null));
        v.put("labels", labels(a.request().labels()));
        return v;
    }

    static Map<String, Object> event(AllocationEvent e) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("type", e.type().name());
        v.put("at", e.at().toString());
        v.put("allocationId", e.allocationId().orElse(null));
        v.put("owner", e.owner().orElse(null));
        v.put("jobId", e.jobId().orElse(null));
        v.put("devices", e.deviceUuids());
        v.put("reason", e.reason().map(Enum::name).orElse(null));
        v.put("message", e.message());
        return v;
    }
}
