package io.gpusched.examples;

import io.gpusched.cli.WorkflowPlanner;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;

/** Plans a small training workflow on a DGX-1: which GPUs each job gets, stage by stage. */
public final class WorkflowPlan {
    private WorkflowPlan() {
    }

    /** A workflow in the form gpusched plan reads. */
    public static final String WORKFLOW = """
            jobs:
              fetch-data: {resources: {cpu: 4}}
              train-a:    {needs: [fetch-data], resources: {gpu_count: 4, gpu_memory_mb: 16384}}
              train-b:    {needs: [fetch-data], resources: {gpu_count: 2}}
              evaluate:   {needs: [train-a, train-b], resources: {gpu_count: 1}}
            """;

    /** @param args ignored */
    public static void main(String[] args) {
        try (GpuInventory node = GpuInventories.simulated("dgx1-v100");
             GpuScheduler s = GpuScheduler.builder().inventory(node).auditLogging(false).build()) {
            for (WorkflowPlanner.Step step : WorkflowPlanner.plan(WORKFLOW, "example", s)) {
                System.out.println("stage " + step.stage() + " " + step.job() + ": "
                        + step.request().map(r -> r.describe() + " -> GPUs " + step.gpus()).orElse("no GPU"));
            }
        }
    }
}
