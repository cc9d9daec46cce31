package io.gpusched.service;

import io.gpusched.core.Allocation;
import io.gpusched.core.MemorySize;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The JSON shapes the service answers with (docs/SERVICE.md), as maps Jackson writes. */
final class ServiceViews {
    private ServiceViews() {
    }

    /** @return the allocation as the console shows one, with {@code ownerUid} and {@code expired} */
    static Map<String, Object> allocation(Allocation a, Instant now) {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("id", a.id());
        v.put("owner", a.owner().orElse(null));
        v.put("ownerUid", a.request().ownerUid().isPresent() ? a.request().ownerUid().getAsLong() : null);
        v.put("jobId", a.request().jobId().orElse(null));
        v.put("devices", a.deviceIndices());
        v.put("uuids", a.deviceUuids());
        v.put("sharing", a.sharing().name());
        v.put("sharedMemoryBytes", a.sharedMemory().map(MemorySize::bytes).orElse(null));
        v.put("createdAt", a.createdAt().toString());
        v.put("expiresAt", a.expiresAt().map(Object::toString).orElse(null));
        v.put("expired", a.expiresAt().map(e -> !e.isAfter(now)).orElse(false));
        v.put("holderPid", a.request().holder().map(h -> h.pid()).orElse(null));
        v.put("labels", a.request().labels());
        return v;
    }

    static List<Map<String, Object>> allocations(List<Allocation> all, Instant now) {
        return all.stream().map(a -> allocation(a, now)).toList();
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
