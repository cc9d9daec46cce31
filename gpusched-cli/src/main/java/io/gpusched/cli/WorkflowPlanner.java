package io.gpusched.cli;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.internal.StrictYaml;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Plans a workflow's GPU jobs: reads {@code jobs:} (a map of name to {@code {needs: [...], resources: {...}}}), orders
 * them by dependency into stages (jobs of one stage can run together), and, stage by stage, asks a scheduler which
 * GPUs each job's {@code resources} ({@code gpu_count}, {@code gpu_memory_mb}, …) would get.
 */
public final class WorkflowPlanner {

    /**
     * One planned job.
     *
     * @param stage      dependency stage, from 0
     * @param job        job name
     * @param request    its GPU request, empty for a job without GPUs
     * @param gpus       device indices it would get
     * @param refusal    why it would not get any, when refused
     */
    public record Step(int stage, String job, Optional<GpuRequest> request, List<Integer> gpus,
            Optional<String> refusal) {
    }

    private WorkflowPlanner() {
    }

    /**
     * @throws GpuConfigException naming the job, an unknown dependency or a cycle
     */
    public static List<Step> plan(String yaml, String source, GpuScheduler scheduler) {
        StrictYaml root = StrictYaml.parse(yaml, source);
        StrictYaml jobs = root.child("jobs");
        if (jobs.keys().isEmpty()) {
            throw root.error("jobs", "a workflow needs a jobs: mapping of job names to {needs, resources}");
        }
        Map<String, List<String>> needs = new LinkedHashMap<>();
        Map<String, Optional<GpuRequest>> requests = new LinkedHashMap<>();
        for (String name : jobs.keys()) {
            StrictYaml j = jobs.child(name);
            List<String> deps = new ArrayList<>(j.strings("needs"));
            deps.addAll(j.strings("depends_on"));
            needs.put(name, deps);
            Object res = j.raw("resources");
            Map<String, Object> resources = new LinkedHashMap<>();
            if (res instanceof Map<?, ?> m) {
                m.forEach((k, v) -> resources.put(String.valueOf(k), v));
            }
            try {
                requests.put(name, GpuRequests.fromResources(resources)
                        .map(r -> r.withJobId(name)));
            } catch (IllegalArgumentException e) {
                throw j.error(jobs.pathOf(name) + ".resources", e.getMessage());
            }
        }
        for (Map.Entry<String, List<String>> e : needs.entrySet()) {
            for (String d : e.getValue()) {
                if (!needs.containsKey(d)) {
                    throw root.error("jobs." + e.getKey() + ".needs", "unknown job \"" + d + "\"; jobs are "
                            + needs.keySet());
                }
            }
        }
        List<List<String>> stages = stages(needs, root);
        List<Step> out = new ArrayList<>();
        for (int s = 0; s < stages.size(); s++) {
            List<Allocation> held = new ArrayList<>();
            for (String job : stages.get(s)) {
                Optional<GpuRequest> r = requests.get(job);
                if (r.isEmpty()) {
                    out.add(new Step(s, job, r, List.of(), Optional.empty()));
                    continue;
                }
                try {
                    Allocation a = scheduler.allocate(r.get());
                    held.add(a);
                    out.add(new Step(s, job, r, a.deviceIndices(), Optional.empty()));
                } catch (GpuAllocationException e) {
                    out.add(new Step(s, job, r, List.of(), Optional.of(e.reason() + ": " + e.getMessage())));
                }
            }
            held.forEach(a -> scheduler.release(a.id()));
        }
        return out;
    }

    private static List<List<String>> stages(Map<String, List<String>> needs, StrictYaml root) {
        List<List<String>> stages = new ArrayList<>();
        Set<String> done = new LinkedHashSet<>();
        while (done.size() < needs.size()) {
            List<String> ready = new ArrayList<>();
            for (Map.Entry<String, List<String>> e : needs.entrySet()) {
                if (!done.contains(e.getKey()) && done.containsAll(e.getValue())) {
                    ready.add(e.getKey());
                }
            }
            if (ready.isEmpty()) {
                List<String> left = needs.keySet().stream().filter(k -> !done.contains(k)).toList();
                throw root.error("jobs", "dependency cycle among " + left);
            }
            stages.add(ready);
            done.addAll(ready);
        }
        return stages;
    }
}
