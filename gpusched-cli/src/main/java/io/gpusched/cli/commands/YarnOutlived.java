package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.Allocation;
import io.gpusched.yarn.NodeManagerHeartbeat;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * What {@code status} and {@code doctor} say about allocations of YARN containers that outlive YARN (issue 32): held
 * while no NodeManager has run for the time its heartbeat names ({@link NodeManagerHeartbeat#outlived}), with the one
 * command that releases them, written with the options that name this node.
 */
final class YarnOutlived {

    private YarnOutlived() {
    }

    /** @return the paragraph to print, or empty when no allocation of a YARN container outlived YARN */
    static Optional<String> note(GpuschedCommand root, Path stateDir, List<Allocation> live) {
        return NodeManagerHeartbeat.outlived(stateDir, live, Instant.now()).map(o -> o.describe(command(root,
                stateDir)));
    }

    /** @return {@code gpusched} with the options that name this node's ledger: its simulation and its directory */
    static String command(GpuschedCommand root, Path stateDir) {
        return "gpusched" + root.simulate().map(s -> " --simulate " + s).orElse("") + " --state-dir " + stateDir;
    }
}
