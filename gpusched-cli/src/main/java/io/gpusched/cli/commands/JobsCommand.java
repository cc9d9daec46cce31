package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.JsonViews;
import io.gpusched.cli.Tables;
import io.gpusched.client.JobView;
import io.gpusched.client.NodeClient;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched jobs}: the node service's jobs. */
@Command(name = "jobs", description = "The node service's jobs: who runs what on which GPUs, and how each ended.")
public final class JobsCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            List<JobView> jobs = n.jobs();
            if (root.json()) {
                root.out().println(Printable.escapeJson(Json.pretty(jobs.stream().map(JsonViews::job).toList())));
                return 0;
            }
            List<String[]> rows = new ArrayList<>();
            rows.add(new String[]{"JOB", "OWNER", "STATE", "GPUS", "STARTED", "EXIT", "COMMAND"});
            for (JobView j : jobs) {
                rows.add(new String[]{j.id(), j.owner(), j.state() + (j.detached() ? " (detached)" : ""),
                    j.devices().toString(), Optional.ofNullable(j.startedAt()).orElse("-"),
                    j.exitCode() == null ? "-" : j.exitCode() + (j.signal() == null ? "" : " (" + j.signal() + ")"),
                    j.argv() == null ? "(hidden)" : String.join(" ", j.argv())});
            }
            root.out().print(Tables.format(rows));
        }
        return 0;
    }
}
