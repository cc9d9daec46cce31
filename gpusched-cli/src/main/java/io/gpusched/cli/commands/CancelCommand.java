package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.JsonViews;
import io.gpusched.client.JobView;
import io.gpusched.client.NodeClient;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched cancel ID}: ends a job (TERM, KILL after the grace period) and releases its GPUs. */
@Command(name = "cancel", description = "Cancel a job (yours, or any job for an admin): TERM, then KILL after the"
        + " node's grace period; its GPUs are released.")
public final class CancelCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", description = "job id")
    String id;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            JobView j = n.cancel(id);
            if (root.json()) {
                root.out().println(Printable.escapeJson(Json.pretty(JsonViews.job(j))));
            } else {
                root.out().println("cancelled " + Printable.escape(j.id()) + " (" + j.state() + ")");
            }
        }
        return 0;
    }
}
