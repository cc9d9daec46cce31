package io.gpusched.cdi;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import io.gpusched.core.devices.GpuDeviceNodes;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What to hand a container runtime for exactly one allocation: {@code --device} flags (Docker, podman without CDI),
 * CDI device names (of the spec {@link CdiSpec} writes), and the environment.
 * <pre>
 * ContainerDevices c = ContainerDevices.of(allocation, inventory.devices(), CdiOptions.defaults());
 * c.dockerArgs();  // [--device=/dev/nvidia1, --device=/dev/nvidiactl, ..., -e, CUDA_VISIBLE_DEVICES=GPU-…]
 * c.cdiArgs();     // [--device, nvidia.com/gpu=GPU-…, -e, CUDA_VISIBLE_DEVICES=GPU-…, ...]
 * </pre>
 *
 * @param cdiNames    fully qualified CDI names ({@code nvidia.com/gpu=GPU-…}), one per device
 * @param deviceNodes the host nodes the container needs: the GPUs' and the vendor's control nodes
 * @param environment variables: {@code NVIDIA_VISIBLE_DEVICES}, {@code CUDA_VISIBLE_DEVICES} by UUID and
 *                    {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}; AMD {@code ROCR_VISIBLE_DEVICES}: the UUIDs when ROCm
 *                    gives them ({@code GPU-...}), else the container's own ordinals {@code 0..n-1} (the container
 *                    sees only the allocation's render nodes, which ROCm numbers in that order)
 * @param containerPaths where each of {@code deviceNodes} appears in the container
 */
public record ContainerDevices(List<String> cdiNames, List<DeviceNode> deviceNodes, Map<String, String> environment,
        List<String> containerPaths) {

    /** Copies the lists. */
    public ContainerDevices {
        cdiNames = List.copyOf(cdiNames);
        deviceNodes = List.copyOf(deviceNodes);
        environment = Collections.unmodifiableMap(new LinkedHashMap<>(environment));
        containerPaths = List.copyOf(containerPaths);
    }

    /**
     * @param allocation the allocation
     * @param host       every allocatable device of the node (the inventory's {@code devices()})
     * @param options    kinds and roots (as for the spec)
     * @throws io.gpusched.core.GpuException when a device has no device node, or vendors are mixed
     */
    public static ContainerDevices of(Allocation allocation, List<GpuDevice> host, CdiOptions options) {
        List<GpuDevice> devices = allocation.devices();
        DevicePlan plan = new GpuDeviceNodes(options.devRoot(), options.procRoot(), true).plan(allocation, host);
        GpuVendor vendor = devices.get(0).vendor();
        String kind = options.kind(vendor);
        List<String> names = new ArrayList<>();
        List<String> uuids = new ArrayList<>();
        for (GpuDevice d : devices) {
            uuids.add(d.uuid());
            names.add(CdiSpec.kindName(kind, CdiSpec.NAME.matcher(d.uuid()).matches() ? d.uuid()
                    : String.valueOf(d.index())));
        }
        Map<String, String> env = new LinkedHashMap<>();
        String list = String.join(",", uuids);
        if (vendor == GpuVendor.NVIDIA) {
            env.put("NVIDIA_VISIBLE_DEVICES", list);
            env.put("CUDA_VISIBLE_DEVICES", list);
            env.put("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        } else if (uuids.stream().allMatch(u -> u.startsWith("GPU-"))) {
            env.put("ROCR_VISIBLE_DEVICES", list);
        } else {
            // no ROCm UUIDs: the container sees only these GPUs' render nodes, which ROCm numbers 0..n-1 inside it
            List<String> ordinals = new ArrayList<>();
            for (int i = 0; i < devices.size(); i++) {
                ordinals.add(String.valueOf(i));
            }
            env.put("ROCR_VISIBLE_DEVICES", String.join(",", ordinals));
        }
        List<String> inside = plan.allowed().stream().map(n -> CdiSpec.containerPath(n, options.devRoot())).toList();
        return new ContainerDevices(names, plan.allowed(), env, inside);
    }

    /** @return {@code --device=HOST[:CONTAINER]} per node, then {@code -e K=V} per variable (docker/podman run) */
    public List<String> dockerArgs() {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < deviceNodes.size(); i++) {
            String host = deviceNodes.get(i).path().toString();
            String in = containerPaths.get(i);
            out.add("--device=" + (host.equals(in) ? host : host + ":" + in));
        }
        environment.forEach((k, v) -> {
            out.add("-e");
            out.add(k + "=" + v);
        });
        return out;
    }

    /**
     * @return {@code --device <kind>=<name>} per device, then {@code -e K=V}: a CDI device sets the variables for
     *         itself alone, so a container of several GPUs needs them given for the whole set
     */
    public List<String> cdiArgs() {
        List<String> out = new ArrayList<>();
        for (String n : cdiNames) {
            out.add("--device");
            out.add(n);
        }
        environment.forEach((k, v) -> {
            out.add("-e");
            out.add(k + "=" + v);
        });
        return out;
    }
}
