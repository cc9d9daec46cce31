package io.gpusched.service;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/** The JSON shapes the service answers with (docs/SERVICE.md), as maps Jackson writes. */
final class ServiceViews {
    private ServiceViews() {
    }

    /**
     * @return the allocation in gpu-core's one shape ({@link AllocationView#toMap()}, the OpenAPI document's
     *     {@code Allocation}), as the console writes it
     */
    static Map<String, Object> allocation(Allocation a, Instant now) {
        return AllocationView.of(a, now).toMap();
    }

    static Map<String, Object> queueEntry(FairQueue.View q) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("position", q.position());
        v.put("user", q.user());
        v.put("uid", q.uid());
        v.put("request", q.request());
        v.put("since", q.since());
        return v;
    }
}
