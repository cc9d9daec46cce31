package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.NodeClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched renew ID --lease D}. */
@Command(name = "renew", description = "Renew an allocation's lease: it now ends this long from now.")
public final class RenewCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", description = "allocation id")
    String id;

    @Option(names = "--lease", paramLabel = "DURATION", required = true, description = "the new lease, from now"
            + " (30m, 2h, 1d)")
    String lease;

    @Override
    public Integer call() {
        Duration d;
        try {
            d = Durations.parse(lease);
        } catch (IllegalArgumentException e) {
            throw new CliException("--lease: " + e.getMessage());
        }
        if (d.isZero()) {
            throw new CliException("--lease: a lease must be longer than 0; release the allocation to end it");
        }
        try (NodeClient n = root.client()) {
            AllocationView a = n.renew(id, d);
            if (root.json()) {
                root.out().println(Printable.escapeJson(Json.pretty(a.toMap())));
            } else {
                root.out().println("renewed " + Printable.escape(a.id()) + ": lease until " + a.expiresAt());
            }
        }
        return 0;
    }
}
