package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.Tables;
import io.gpusched.cli.WorkflowPlanner;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import io.gpusched.core.internal.TextFiles;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched plan}. */
@Command(name = "plan", description = "Which GPUs each job of a workflow would get, in dependency order.")
public final class PlanCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "WORKFLOW", description = "workflow YAML with jobs: {name: {needs, resources}}")
    Path workflow;

    @Option(names = "--strategy", description = "packing, spreading, topology, topology-remaining or thermal")
    String strategy;

    @Override
    public Integer call() {
        // a regular file of at most 3 MiB, UTF-8, read before the node is opened (a FIFO or /dev/zero is refused)
        String text = TextFiles.readUtf8(workflow, "workflow file");
        try (Node n = root.open(Optional.ofNullable(strategy))) {
            GpuScheduler scratch = GpuScheduler.builder().inventory(n.inventory()).config(n.config())
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
            for (Allocation held : n.scheduler().allocations()) {
                scratch.allocate(GpuRequest.builder().deviceUuids(held.deviceUuids()).build());
            }
            List<WorkflowPlanner.Step> steps = WorkflowPlanner.plan(text, workflow.toString(), scratch);
            if (root.json()) {
                root.out()
                        .println(
                                Printable
                                        .escapeJson(Json.pretty(steps.stream()
                                                .map(s -> Map.of("stage", s.stage(), "job", s.job(),
                                                        "gpus", s.gpus(), "refusal", s.refusal().orElse("")))
                                                .toList())));
                return 0;
            }
            List<String[]> rows = new ArrayList<>();
            rows.add(new String[]{"STAGE", "JOB", "ASKS", "GETS"});
            for (WorkflowPlanner.Step s : steps) {
                rows.add(new String[]{String.valueOf(s.stage()), s.job(),
                    s.request().map(GpuRequest::describe).orElse("no GPU"),
                    s.request().isEmpty() ? "-" : s.refusal().map(r -> "refused: " + r)
                            .orElse("GPUs " + s.gpus())});
            }
            root.out().print(Tables.format(rows));
        }
        return 0;
    }
}
