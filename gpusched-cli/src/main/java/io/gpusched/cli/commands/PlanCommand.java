package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.Tables;
import io.gpusched.cli.WorkflowPlanner;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.internal.Json;
import java.io.IOException;
import java.nio.file.Files;
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
    public Integer call() throws IOException {
        if (!Files.isRegularFile(workflow)) {
            throw new CliException("workflow file " + workflow + " does not exist");
        }
        try (Node n = root.open(Optional.ofNullable(strategy))) {
            GpuScheduler scratch = GpuScheduler.builder().inventory(n.inventory()).config(n.config())
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
            for (Allocation held : n.scheduler().allocations()) {
                scratch.allocate(GpuRequest.builder().deviceUuids(held.deviceUuids()).build());
            }
            List<WorkflowPlanner.Step> steps = WorkflowPlanner.plan(Files.readString(workflow),
                    workflow.toString(), scratch);
            if (root.json()) {
                root.out().println(Json.pretty(steps.stream().map(s -> Map.of("stage", s.stage(), "job", s.job(),
                        "gpus", s.gpus(), "refusal", s.refusal().orElse(""))).toList()));
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
