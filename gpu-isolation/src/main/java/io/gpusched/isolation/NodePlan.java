package io.gpusched.isolation;

import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import java.util.ArrayList;
import java.util.List;

/**
 * The device nodes of one allocation: those its job may use and those of the host's other GPUs it must not, plus
 * notes on optional nodes that were skipped.
 *
 * @param allowed the allocation's GPU nodes and the vendor's control nodes
 * @param denied  every other GPU node of the host
 * @param vendorMajors majors that carry only GPU nodes (a device program may deny the rest of them wholesale)
 * @param notes   optional nodes skipped, and why
 */
public record NodePlan(List<DeviceNode> allowed, List<DeviceNode> denied, List<Integer> vendorMajors,
        List<String> notes) {

    /** Copies the lists. */
    public NodePlan {
        allowed = List.copyOf(allowed);
        denied = List.copyOf(denied);
        vendorMajors = List.copyOf(vendorMajors);
        notes = List.copyOf(notes);
    }

    /**
     * @param plan the vendor table's plan
     * @return the same nodes, ready to become rules
     */
    public static NodePlan of(DevicePlan plan) {
        return new NodePlan(plan.allowed(), plan.denied(), plan.vendorMajors(), plan.notes());
    }

    /**
     * @param strict     deny everything not allowed (then {@code baseAllow} comes first)
     * @param wildcards  also deny each vendor major wholesale after the allows (cgroup v2 can, v1 cannot)
     * @param baseAllow  host devices a strict fence still allows ({@code /dev/null} and friends)
     * @return the rules in order, first match wins
     */
    public List<DeviceRule> rules(boolean strict, boolean wildcards, List<DeviceRule> baseAllow) {
        List<DeviceRule> out = new ArrayList<>();
        if (strict) {
            out.addAll(baseAllow);
        }
        for (DeviceNode n : allowed) {
            out.add(DeviceRule.allowChar(n.major(), n.minor(), "rw"));
        }
        for (DeviceNode n : denied) {
            out.add(DeviceRule.denyChar(n.major(), n.minor(), "rwm"));
        }
        if (wildcards) {
            for (int major : vendorMajors) {
                out.add(DeviceRule.denyChar(major, DeviceRule.ANY, "rwm"));
            }
        }
        return out;
    }
}
