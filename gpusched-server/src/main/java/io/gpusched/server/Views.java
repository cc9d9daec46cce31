package io.gpusched.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceState;
import io.gpusched.core.DeviceView;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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

    /** Longest text field the console sends (an owner, a job id, a label's key or value), in UTF-8 bytes. */
    static final int MAX_FIELD_BYTES = 256;
    /** Most labels of one allocation the console sends. */
    static final int MAX_LABELS = 32;
    /** Most holders of one device listed in a device view ({@code holdersTotal} counts them all). */
    static final int MAX_HOLDERS = 64;
    /**
     * Most bytes of holders one device view lists (their JSON): the list ends early rather than pass it
     * ({@code holdersTotal} counts them all; {@code GET /api/v1/allocations?device=<index>} pages through them all).
     */
    static final int MAX_HOLDER_BYTES = 64 * 1024;

    /**
     * @return {@code s} when it is at most {@value #MAX_FIELD_BYTES} bytes in UTF-8 (as the console sends it), else
     *     its longest prefix of whole characters within {@value #MAX_FIELD_BYTES} bytes followed by {@code "…(+N)"}, N
     *     the characters (code points) left out: whatever the ledger holds, the console's answers and events stay
     *     bounded
     */
    static String bounded(String s) {
        int bytes = 0;
        int i = 0;
        while (i < s.length()) {
            int cp = s.codePointAt(i);
            int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (bytes + n > MAX_FIELD_BYTES) {
                return s.substring(0, i) + "\u2026(+" + s.codePointCount(i, s.length()) + ")";
            }
            bytes += n;
            i += Character.charCount(cp);
        }
        return s;
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

    /**
     * @return each device in the one device shape ({@link DeviceView}), with the allocations holding it: the first in
     *     page order ({@link AllocationsHandler#PAGE_ORDER}), at most {@value #MAX_HOLDERS} and
     *     {@value #MAX_HOLDER_BYTES} bytes of them, and {@code holdersTotal}, how many hold it
     */
    static List<Map<String, Object>> devices(List<DeviceState> devices, List<Allocation> allocations) {
        Instant now = Instant.now();
        List<Allocation> ordered = new ArrayList<>(allocations);
        ordered.sort(Comparator.comparing(Allocation::id, AllocationsHandler.PAGE_ORDER));
        List<Map<String, Object>> out = new ArrayList<>();
        for (DeviceState d : devices) {
            Map<String, Object> v = DeviceView.of(d, List.of(), now).toMap();
            List<Map<String, Object>> shown = new ArrayList<>();
            long bytes = 0;
            boolean full = false;
            int total = 0;
            for (Allocation a : ordered) {
                if (!a.deviceIndices().contains(d.index())) {
                    continue;
                }
                total++;
                full = full || shown.size() == MAX_HOLDERS;
                if (!full) {
                    Map<String, Object> h = allocation(a);
                    long n = json(h).getBytes(StandardCharsets.UTF_8).length + 1L;
                    full = bytes + n > MAX_HOLDER_BYTES;
                    if (!full) {
                        shown.add(h);
                        bytes += n;
                    }
                }
            }
            v.put("holders", shown);
            v.put("holdersTotal", total);
            out.add(v);
        }
        return out;
    }

    /**
     * The device views of the event stream: without holders, which the page derives from the allocations (an
     * allocation is sent once, not again for each device it holds).
     */
    static List<Map<String, Object>> devicesWithoutHolders(List<DeviceState> devices) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map<String, Object> d : devices(devices, List.of())) {
            d.remove("holders");
            d.remove("holdersTotal");
            out.add(d);
        }
        return out;
    }

    /** @return the allocation in the one allocation shape ({@link AllocationView}), {@link #bounded} */
    static Map<String, Object> allocation(Allocation a) {
        return allocation(a, Instant.now());
    }

    /**
     * @param now when the view is taken (whether its lease has ended)
     * @return the allocation in the one allocation shape ({@link AllocationView}), {@link #bounded}
     */
    static Map<String, Object> allocation(Allocation a, Instant now) {
        return bounded(AllocationView.of(a, now).toMap());
    }

    /** Field of a bounded allocation: the names of the fields whose values were cut (empty when none was). */
    static final String TRUNCATED_FIELDS = "truncatedFields";
    /** Field of a bounded allocation: how many labels were left out (past {@value #MAX_LABELS}). */
    static final String LABELS_OMITTED = "labelsOmitted";

    /**
     * @return the allocation shape with its owner, job id and labels {@link #bounded} (at most {@value #MAX_LABELS}
     *     labels): whatever the ledger holds, the console's answers and events stay bounded; it says what was cut:
     *     {@value #TRUNCATED_FIELDS} names each field cut ({@code owner}, {@code jobId}, and {@code labels} when a key
     *     or value was cut or labels were left out) and {@value #LABELS_OMITTED} counts the labels left out
     */
    static Map<String, Object> bounded(Map<String, Object> allocation) {
        Map<String, Object> v = new LinkedHashMap<>(allocation);
        List<String> cut = new ArrayList<>();
        for (String k : List.of("owner", "jobId")) {
            if (v.get(k) instanceof String s) {
                String b = bounded(s);
                if (!b.equals(s)) {
                    cut.add(k);
                }
                v.put(k, b);
            }
        }
        int omitted = 0;
        if (v.get("labels") instanceof Map<?, ?> l) {
            Map<String, String> labels = new LinkedHashMap<>();
            l.forEach((key, value) -> labels.put(String.valueOf(key), String.valueOf(value)));
            Map<String, String> kept = labels(labels);
            omitted = labels.size() - kept.size();
            boolean labelCut = omitted > 0;
            for (Map.Entry<String, String> e : labels.entrySet()) {
                labelCut = labelCut || !bounded(e.getKey()).equals(e.getKey())
                        || !bounded(e.getValue()).equals(e.getValue());
            }
            if (labelCut) {
                cut.add("labels");
            }
            v.put("labels", kept);
        }
        v.put(TRUNCATED_FIELDS, cut);
        v.put(LABELS_OMITTED, omitted);
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
