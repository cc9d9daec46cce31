package io.gpusched.kubernetes;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import io.gpusched.kubernetes.api.v1beta1.CDIDevice;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.DeviceSpec;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds one container's {@code ContainerAllocateResponse} from the GPUs behind its ids. NVIDIA:
 * {@code NVIDIA_VISIBLE_DEVICES} and {@code CUDA_VISIBLE_DEVICES} by UUID (MIG UUIDs for partitions) and
 * {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}; AMD: {@code ROCR_VISIBLE_DEVICES} by UUID where every GPU has a {@code GPU-}
 * UUID (ROCm's own form), else none (the device nodes alone fence it). Device specs ({@code rw}) for the GPU nodes and
 * the vendor's control nodes, from gpu-core's {@link GpuDeviceNodes} table. With CDI on, the answer names
 * {@code <kind>=<uuid>} CDI devices and carries no device specs nor {@code NVIDIA_VISIBLE_DEVICES} (the CDI spec
 * injects the nodes; the variable would ask a legacy runtime hook to inject them a second time).
 */
final class AllocateResponder {
    private final DevicePluginConfig config;
    private final GpuDeviceNodes nodes;
    private final List<GpuDevice> host;

    AllocateResponder(DevicePluginConfig config, List<GpuDevice> host) {
        this.config = config;
        this.host = List.copyOf(host);
        this.nodes = new GpuDeviceNodes(config.devRoot(), config.procRoot(), false);
    }

    /**
     * @param ids     the ids as the kubelet sent them (for messages)
     * @param devices the distinct GPUs behind them, in node order
     * @throws GpuException when a GPU's device nodes are not known (no device minor)
     */
    ContainerAllocateResponse respond(List<String> ids, List<GpuDevice> devices) {
        ContainerAllocateResponse.Builder b = ContainerAllocateResponse.newBuilder();
        GpuVendor vendor = devices.get(0).vendor();
        List<String> uuids = devices.stream().map(GpuDevice::uuid).toList();
        Map<String, String> env = new LinkedHashMap<>();
        if (vendor == GpuVendor.NVIDIA) {
            if (!config.cdi()) {
                env.put("NVIDIA_VISIBLE_DEVICES", String.join(",", uuids));
            }
            env.put("CUDA_VISIBLE_DEVICES", String.join(",", uuids));
            env.put("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        } else if (uuids.stream().allMatch(u -> u.startsWith("GPU-"))) {
            env.put("ROCR_VISIBLE_DEVICES", String.join(",", uuids));
        }
        b.putAllEnvs(env);
        if (config.cdi()) {
            String kind = config.cdiKind(vendor);
            for (String u : uuids) {
                b.addCdiDevices(CDIDevice.newBuilder().setName(kind + "=" + u));
            }
            return b.build();
        }
        DevicePlan plan = nodes.plan("devices " + ids, devices, host);
        for (DeviceNode n : plan.allowed()) {
            String path = hostPath(n.path());
            b.addDevices(DeviceSpec.newBuilder().setContainerPath(path).setHostPath(path).setPermissions("rw"));
        }
        return b.build();
    }

    /** A node seen under {@code devRoot} is at {@code /dev/...} on the host. */
    private String hostPath(Path seen) {
        Path rel = config.devRoot().relativize(seen);
        return "/dev/" + rel.toString().replace('\\', '/');
    }
}
