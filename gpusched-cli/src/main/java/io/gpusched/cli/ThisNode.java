package io.gpusched.cli;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.host.NodeNames;
import java.util.Set;

/**
 * The names this node answers to, for {@code --target HOST::I,J} ({@link NodeNames}, the one rule the console and the
 * node service follow too), with the command's refusal.
 */
public final class ThisNode {
    private ThisNode() {
    }

    /** @return this node's names: the kernel's host name, its short form, the resolver's name for it, localhost */
    public static Set<String> names() {
        return NodeNames.names();
    }

    /**
     * @return {@code request} when its {@code --target} names no host or this node
     * @throws CliException naming the target's host and this node's names, when it names another node
     */
    public static GpuRequest requireLocalTarget(GpuRequest request) {
        try {
            return NodeNames.requireLocalTarget(request);
        } catch (IllegalArgumentException e) {
            throw new CliException(e.getMessage());
        }
    }
}
