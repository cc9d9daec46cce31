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
import java.time.Instant;
import java.util.ArrayList;
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

    /** @return each device in the one device shape ({@link DeviceView}), with the allocations holding it */
    static List<Map<String, Object>> devices(List<DeviceState> devices, List<Allocation> allocations) {
        Instant now = Instant.now();
        List<Map<String, Object>> out = new ArrayList<>();
        for (DeviceState d : devices) {
            out.add(DeviceView.of(d, allocations, now).toMap());
        }
        return out;
    }

    static List<Map<String, Object>> allocations(List<Allocation> allocations) {
        return allocations.stream().map(Views::allocation).toList();
    }

    /** @return the allocation in the one allocation shape ({@link AllocationView}) */
    static Map<String, Object> allocation(Allocation a) {
        return AllocationView.of(a, Instant.now()).toMap();
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
