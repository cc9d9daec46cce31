package io.gpusched.isolation;

import io.gpusched.core.devices.DeviceNode;
import io.gpusched.core.devices.DevicePlan;
import java.util.ArrayList;
import java.util.List;

/**
 * The device nodes of one allocation: those its job may use and those of the host's other GPUs it must not, plus
 * notes on optional nodes that were skipped. Every node here has its number (a rule needs it): a node the vendor
 * table planned by path alone ({@code /dev/nvidia-uvm} before its module is loaded) is left out, and the notes say so.
 *
 * @param allowed the allocation's GPU nodes and the vendor's control nodes, numbered
 * @param denied  every other GPU node of the host
 * @param vendorMajors majors that carry only GPU nodes (a device program may deny the rest of them wholesale)
 * @param notes   optional nodes skipped, and why
 */
public record NodePlan(List<DeviceNode> allowed, List<DeviceNode> denied, List<Integer> vendorMajors,
        List<String> notes) {

    /** Copies the lists. @throws IllegalArgumentException for a node without its number */
    public NodePlan {
        for (List<DeviceNode> l : List.of(allowed, denied)) {
            for (DeviceNode n : l) {
                if (!n.numbered()) {
                    throw new IllegalArgumentException(n.path() + " has no known major: a node plan holds numbered"
                            + " nodes only (a cgroup rule needs the number)");
                }
            }
        }
        allowed = List.copyOf(allowed);
        denied = List.copyOf(denied);
        vendorMajors = List.copyOf(vendorMajors);
        notes = List.copyOf(notes);
    }

    /**
     * @param plan the vendor table's plan
     * @return the same numbered nodes, ready to become rules (nodes planned by path alone are left out, with a note)
     */
    public static NodePlan of(DevicePlan plan) {
        List<String> notes = new ArrayList<>(plan.notes());
        List<DeviceNode> allowed = new ArrayList<>();
        for (DeviceNode n : plan.allowed()) {
            if (n.numbered()) {
                allowed.add(n);
            } else {
                notes.add("no cgroup rule for " + n.path() + ": its major is not known (module not loaded)");
            }
        }
        return new NodePlan(allowed, plan.denied().stream().filter(DeviceNode::numbered).toList(),
                plan.vendorMajors(), notes);
    }

    /** @return this plan with more notes */
    NodePlan withNotes(List<String> more) {
        List<String> all = new ArrayList<>(notes);
        all.addAll(more);
        return new NodePlan(allowed, denied, vendorMajors, all);
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
