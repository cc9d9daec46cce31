package io.gpusched.cli;

import io.gpusched.client.JobView;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The command's JSON of devices and allocations: gpu-core's one shape ({@link DeviceView}, {@link AllocationView}),
 * with the names an earlier release printed kept for one more release where users read them ({@code status --json},
 * {@code list --json}, {@code env --json}): an allocation's {@code deviceIndices} and {@code deviceUuids} (now
 * {@code devices} and {@code uuids}), a device's {@code heldBy} and {@code sharedBy} (now its {@code holders}).
 */
public final class JsonViews {
    private JsonViews() {
    }

    /** @return the device in the one shape, with {@code heldBy} and {@code sharedBy} as before */
    public static Map<String, Object> device(DeviceView d) {
        Map<String, Object> m = d.toMap();
        m.put("heldBy", d.exclusiveHolder().orElse(null));
        m.put("sharedBy", d.holders().stream().filter(h -> !h.exclusive()).map(AllocationView::id).toList());
        return m;
    }

    /** @return the devices, each as {@link #device} */
    public static List<Map<String, Object>> devices(List<DeviceView> devices) {
        List<Map<String, Object>> out = new ArrayList<>();
        devices.forEach(d -> out.add(device(d)));
        return out;
    }

    /** @return a job as the node service's job view shows it */
    public static Map<String, Object> job(JobView j) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", j.id());
        m.put("owner", j.owner());
        m.put("uid", j.uid());
        m.put("state", j.state());
        m.put("allocationId", j.allocationId());
        m.put("devices", j.devices());
        m.put("createdAt", j.createdAt());
        m.put("startedAt", j.startedAt());
        m.put("endedAt", j.endedAt());
        m.put("exitCode", j.exitCode());
        m.put("signal", j.signal());
        m.put("detached", j.detached());
        m.put("cgroup", j.cgroup());
        m.put("argv", j.argv());
        m.put("cwd", j.cwd());
        m.put("output", j.output());
        return m;
    }

    /** @return the allocations, each in the one shape with its earlier names */
    public static List<Map<String, Object>> allocations(List<AllocationView> allocations) {
        List<Map<String, Object>> out = new ArrayList<>();
        allocations.forEach(a -> out.add(a.toMapWithOldNames()));
        return out;
    }
}
