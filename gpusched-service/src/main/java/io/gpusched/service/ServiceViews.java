package io.gpusched.service;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.server.ConsoleServer;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;

/** The JSON shapes the service answers with (docs/SERVICE.md), as maps Jackson writes. */
final class ServiceViews {
    private ServiceViews() {
    }

    /**
     * @return the allocation in gpu-core's one shape ({@link AllocationView#toMap()}, the OpenAPI document's
     *     {@code Allocation}), bounded as the console writes it ({@link ConsoleServer#allocationView}: owner, job id
     *     and labels cut, {@code truncatedFields} and {@code labelsOmitted} saying what was), whatever the request held
     */
    static Map<String, Object> allocation(Allocation a, Instant now) {
        return ConsoleServer.allocationView(a, now);
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
