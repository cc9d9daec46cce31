package io.gpusched.kubernetes;

import io.gpusched.core.GpuDevice;
import java.util.List;
import java.util.Objects;

/**
 * One extended resource the plug-in advertises, with its device ids.
 *
 * @param name    the resource name ({@code nvidia.com/gpu}, {@code nvidia.com/mig-1g.10gb}, {@code amd.com/gpu})
 * @param devices its ids, in node order
 */
public record AdvertisedResource(String name, List<Entry> devices) {

    /**
     * One id advertised to the kubelet.
     *
     * @param id      the device id ({@value DevicePluginConfig#MAX_ID_LENGTH} characters at most): the GPU's UUID, or
     *                {@code <uuid>::<replica>} under time-slicing
     * @param device  the GPU or partition it stands for
     * @param replica its replica number under time-slicing (0 without)
     */
    public record Entry(String id, GpuDevice device, int replica) {
        /** @throws IllegalArgumentException for an id the kubelet would refuse */
        public Entry {
            Objects.requireNonNull(device, "device");
            if (id == null || id.isEmpty() || id.length() > DevicePluginConfig.MAX_ID_LENGTH) {
                throw new IllegalArgumentException("device id \"" + id + "\" must have 1 to "
                        + DevicePluginConfig.MAX_ID_LENGTH + " characters");
            }
        }
    }

    /** Copies the list. */
    public AdvertisedResource {
        Objects.requireNonNull(name, "name");
        devices = List.copyOf(devices);
    }

    /** @return the socket file name this resource is served on, e.g. {@code gpusched-nvidia.com-gpu.sock} */
    public String socketName() {
        return "gpusched-" + name.replace('/', '-') + ".sock";
    }
}
