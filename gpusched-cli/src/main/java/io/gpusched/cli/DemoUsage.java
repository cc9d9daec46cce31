package io.gpusched.cli;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.core.internal.StrictYaml;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The demo's accounting part, on a simulated node only: replays the last hour of scripted usage (a clock that starts an
 * hour ago and moves in 10-second sweeps) through the node's real sampler into the simulated node's accounting store,
 * so that {@code gpusched --simulate PROFILE report} shows real figures afterwards: a two-GPU training job, an
 * inference job, an allocation left idle (flagged, then warned by the idle policy) and two jobs sharing one GPU
 * (charged per process). On a node with GPUs the demo replays nothing: the real sampler is the console or the service.
 */
final class DemoUsage {
    private static final Duration SWEEP = Duration.ofSeconds(10);
    private static final int MINUTES = 60;

    private DemoUsage() {
    }

    /** A clock the replay moves by hand. */
    private static final class ReplayClock extends Clock {
        private volatile Instant now;

        ReplayClock(Instant start) {
            now = start;
        }

        void advance(Duration d) {
            now = now.plus(d);
        }

        @Override
        public ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return this;
        }

        @Override
        public Instant instant() {
            return now;
        }
    }

    /**
     * @param out      where to say what was replayed
     * @param profile  the simulated profile or description file
     * @param stateDir the simulated node's state directory
     */
    static void replay(PrintStream out, String profile, Path stateDir) {
        Instant end = Instant.now().truncatedTo(ChronoUnit.MINUTES);
        ReplayClock clock = new ReplayClock(end.minus(Duration.ofMinutes(MINUTES)));
        SimulatedGpuInventory inv = NodeDescriptions.PROFILES.contains(profile)
                ? NodeDescriptions.profile(profile, clock)
                : NodeDescriptions.parse(StrictYaml.read(Path.of(profile), "node description"), profile, clock);
        Map<Integer, String> pids = new HashMap<>();
        Map<Integer, Map<Integer, UsageTrace>> scripted = new HashMap<>();
        ProcessAttribution attribution = ((ProcessAttribution) (d, pid, holders) -> Optional.ofNullable(
                pids.get(pid)).map(UsageOwner::allocation)).orElse(AllocationAttribution.host());
        try (inv; GpuScheduler scheduler = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            List<String> idle = new ArrayList<>();
            HostIdleEffects effects = new HostIdleEffects(scheduler).listener(n -> {
                if (n.step() == IdleStep.FLAGGED || n.step() == IdleStep.WARNED) {
                    idle.add(n.step().name().toLowerCase(Locale.ROOT) + " " + n.message());
                }
            });
            Optional<AccountingSampler> opened = AccountingSampler.open(AccountingStore.at(stateDir),
                    AccountingSettings.defaults(), inv, attribution, effects, clock);
            if (opened.isEmpty()) {
                out.println("Accounting: another process is this simulated node's sampler (a console?); no usage"
                        + " replayed.");
                return;
            }
            try (AccountingSampler sampler = opened.get()) {
                scheduler.addListener(sampler);
                sampler.knownLive(scheduler.allocations());
                Instant start = clock.instant();
                sampler.sweep(inv.sample(), scheduler.allocations());
                List<Job> jobs = jobs(inv);
                Map<Job, Allocation> running = new HashMap<>();
                for (int tick = 0; tick <= MINUTES * 6; tick++) {
                    if (tick > 0) {
                        clock.advance(SWEEP);
                    }
                    long minute = tick / 6;
                    for (Job j : jobs) {
                        if (tick % 6 == 0 && minute == j.startMinute && !running.containsKey(j)) {
                            try {
                                Allocation a = scheduler.allocate(GpuRequests.fromCliFlags(j.flags));
                                running.put(j, a);
                                start(inv, a, j, pids, scripted);
                            } catch (GpuAllocationException e) {
                                // a smaller node: this job does not fit; the others still show
                            }
                        }
                        if (tick % 6 == 0 && minute == j.endMinute && running.containsKey(j)) {
                            Allocation a = running.remove(j);
                            stop(inv, a, pids, scripted);
                            scheduler.release(a.id());
                        }
                    }
                    sampler.sweep(inv.sample(), scheduler.allocations());
                }
                for (Allocation a : running.values()) {
                    stop(inv, a, pids, scripted);
                    scheduler.release(a.id());
                }
                sampler.checkpoint();
                out.println();
                out.println("Accounting: replayed the last hour of scripted usage on this simulated node (a clock"
                        + " moved in 10-s sweeps through the node's sampler) into " + sampler.store().directory());
                idle.forEach(l -> out.println("  idle policy: " + l));
                out.print(ReportViews.text(UsageReport.of(sampler.store(), start, clock.instant(),
                        UsageReport.GroupBy.OWNER)));
                out.println("See it again with: gpusched --simulate " + profile + " report [--by allocation|device|day]"
                        + " [ID]");
            }
        }
    }

    /** One scripted job: when it runs, what it asks, how its GPUs are used. */
    private record Job(String[] flags, long startMinute, long endMinute, String preset, int busyPercent) {
    }

    private static List<Job> jobs(SimulatedGpuInventory inv) {
        int n = inv.devices().size();
        MemorySize smallest = inv.devices().stream().map(GpuDevice::memory).min(MemorySize::compareTo).orElseThrow();
        String quarter = MemorySize.ofMebibytes(Math.max(1, smallest.toMebibytes() / 4)).toString();
        List<Job> jobs = new ArrayList<>();
        jobs.add(new Job(new String[]{"--gpu=" + Math.min(2, n), "--owner=alice", "--job=train-resnet"}, 0, 50,
                "training", 0));
        jobs.add(new Job(new String[]{"--gpu=1", "--owner=bob", "--job=serve-llm"}, 10, 50, "inference", 0));
        jobs.add(new Job(new String[]{"--gpu=1", "--owner=carol", "--job=notebook"}, 0, MINUTES + 1, "idle", 0));
        jobs.add(new Job(new String[]{"--gpu=1", "--shared=" + quarter, "--owner=dave", "--job=finetune"}, 5, 45,
                null, 40));
        jobs.add(new Job(new String[]{"--gpu=1", "--shared=" + quarter, "--owner=erin", "--job=eval"}, 5, 45, null,
                10));
        return jobs;
    }

    private static void start(SimulatedGpuInventory inv, Allocation a, Job j, Map<Integer, String> pids,
            Map<Integer, Map<Integer, UsageTrace>> scripted) {
        for (GpuDevice d : a.devices()) {
            if (j.preset != null) {
                inv.setTrace(d.index(), UsageTrace.preset(j.preset, d.memory()));
            } else {
                int pid = 20_000 + pids.size();
                pids.put(pid, a.id());
                Map<Integer, UsageTrace> procs = scripted.computeIfAbsent(d.index(), k -> new HashMap<>());
                procs.put(pid, new UsageTrace(SWEEP, List.of((double) j.busyPercent, j.busyPercent * 0.8),
                        List.of(MemorySize.ofMebibytes(Math.max(1, d.memory().toMebibytes() / 5))), List.of()));
                inv.setProcessTraces(d.index(), procs);
            }
        }
    }

    private static void stop(SimulatedGpuInventory inv, Allocation a, Map<Integer, String> pids,
            Map<Integer, Map<Integer, UsageTrace>> scripted) {
        for (GpuDevice d : a.devices()) {
            Map<Integer, UsageTrace> procs = scripted.get(d.index());
            if (procs != null) {
                procs.keySet().removeIf(pid -> a.id().equals(pids.get(pid)));
                inv.setProcessTraces(d.index(), procs);
            } else {
                inv.setTrace(d.index(), null);
            }
        }
    }
}
