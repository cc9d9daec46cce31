package io.gpusched.core.devices;

import java.util.List;

/**
 * The device nodes of a set of GPUs on a host: those a job given the set may use, and those of the host's other GPUs
 * it must not, plus notes on optional nodes that were skipped. Isolation turns it into device rules; container
 * runtimes (CDI, Kubernetes, YARN Docker) turn {@link #allowed()} into device specs.
 *
 * @param allowed      the set's GPU nodes (and MIG caps, DRM card nodes) and the vendor's control nodes; the uvm nodes
 *                     (and {@code kfd}) by path alone while their module is not loaded ({@link DeviceNode#numbered()})
 * @param denied       every other GPU node of the host
 * @param vendorMajors majors that carry only GPU nodes (a device program may deny the rest of them wholesale)
 * @param notes        optional nodes skipped, and why
 */
public record DevicePlan(List<DeviceNode> allowed, List<DeviceNode> denied, List<Integer> vendorMajors,
        List<String> notes) {

    /** Copies the lists. */
    public DevicePlan {
        allowed = List.copyOf(allowed);
        denied = List.copyOf(denied);
        vendorMajors = List.copyOf(vendorMajors);
        notes = List.copyOf(notes);
    }

    /**
     * @return the allowed nodes whose role is a vendor control node ({@code control}, {@code uvm}, {@code modeset},
     * {@code kfd})
     */
    public List<DeviceNode> controlNodes() {
        return allowed.stream().filter(DeviceNode::isControl).toList();
    }

    /**
     * @return the allowed nodes that belong to the set's GPUs themselves ({@code gpu}, {@code mig-cap}, {@code render},
     * {@code card})
     */
    public List<DeviceNode> gpuNodes() {
        return allowed.stream().filter(n -> !n.isControl()).toList();
    }
}
