package io.gpusched.kubernetes;

import io.gpusched.kubernetes.api.v1beta1.Device;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.NUMANode;
import io.gpusched.kubernetes.api.v1beta1.TopologyInfo;
import java.util.function.Predicate;

/** Builds the ListAndWatch list of a resource: one Device per id, its health and its NUMA node. */
final class DeviceLists {
    /** The kubelet's word for a usable device. */
    static final String HEALTHY = "Healthy";
    /** The kubelet's word for an unusable one. */
    static final String UNHEALTHY = "Unhealthy";

    private DeviceLists() {
    }

    /**
     * @param resource  the resource
     * @param healthy   whether a GPU (by UUID) is advertised Healthy
     * @return the full list; a device without a known NUMA node has no topology (no preference)
     */
    static ListAndWatchResponse of(AdvertisedResource resource, Predicate<String> healthy) {
        ListAndWatchResponse.Builder b = ListAndWatchResponse.newBuilder();
        for (AdvertisedResource.Entry e : resource.devices()) {
            Device.Builder d = Device.newBuilder().setID(e.id())
                    .setHealth(healthy.test(e.device().uuid()) ? HEALTHY : UNHEALTHY);
            e.device().numaNode().ifPresent(n -> d.setTopology(TopologyInfo.newBuilder()
                    .addNodes(NUMANode.newBuilder().setID(n))));
            b.addDevices(d);
        }
        return b.build();
    }
}
