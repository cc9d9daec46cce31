package io.gpusched.cli.commands;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.ReportTimes;
import io.gpusched.accounting.ReportViews;
import io.gpusched.accounting.UsageReport;
import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.core.internal.Json;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/**
 * {@code gpusched report}: GPU usage from the node's accounting store, read without a lock (any user who may read the
 * state directory may run it).
 */
@Command(name = "report", description = {"GPU usage from the node's accounting store: GPU-hours, energy (kWh), mean"
        + " utilization, idle share and peak memory per owner, allocation, GPU or day.",
    "With an allocation id: that allocation per GPU, with a verdict line."})
public final class ReportCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Spec
    CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "ID", description = "one allocation (or job) to report on")
    String id;

    @Option(names = "--since", paramLabel = "WHEN", defaultValue = "7d",
            description = "start: a duration back from now (7d, 12h, 30m), a date (2026-01-31, UTC) or an instant"
                    + " (2026-01-31T08:00:00Z); default ${DEFAULT-VALUE}")
    String since;

    @Option(names = "--until", paramLabel = "WHEN", description = "end, in the same forms (default: now)")
    String until;

    @Option(names = "--by", paramLabel = "GROUP", defaultValue = "owner",
            description = "owner, allocation, device, day, pod or slurm-job; default ${DEFAULT-VALUE}")
    String by;

    @Option(names = "--csv", description = "print CSV")
    boolean csv;

    @Override
    public Integer call() {
        if (csv && root.json()) {
            throw new CliException("--csv and --json: choose one");
        }
        UsageReport.GroupBy group = UsageReport.GroupBy.parse(by);
        Instant now = Instant.now();
        Instant from = when("--since", since, now);
        Instant to = until == null ? now : when("--until", until, now);
        AccountingStore store = AccountingStore.at(stateDirectory());
        refuseWhatOthersMayChange(store.directory());
        if (id != null) {
            for (String o : List.of("--csv", "--by", "--since", "--until")) {
                if (spec.commandLine().getParseResult().hasMatchedOption(o)) {
                    // honoured or refused, never dropped: a script that asked for CSV must not parse a table
                    // (review53)
                    throw new CliException(o + " applies to a report over a period; with an allocation or job id"
                            + " give none of --csv, --by, --since, --until (--json is honoured)");
                }
            }
            AllocationUsage u = AllocationUsage.find(store, id).or(() -> ofJob(store, id))
                    .orElseThrow(() -> new CliException("no usage is recorded for allocation \"" + printable(id)
                            + "\" (nor for a job of that id) in " + store.directory() + " (its days may be past"
                            + " gpu.accounting.retention, or no sampler ran while it lived)", 1));
            if (u.id().equals(id)) {
                // an id that is also a job's: said, so the allocation shown is not taken for the job (review56)
                List<String> jobs = AllocationUsage.allocationsOfJob(store, id, 12).stream()
                        .filter(a -> !a.equals(id)).toList(); // 11 others at most: more than 10 reads "..."
                if (!jobs.isEmpty()) {
                    root.err().println("gpusched: note: \"" + printable(id) + "\" is allocation " + id + " (shown);"
                            + " it is also the job id of allocation" + (jobs.size() == 1 ? " " : "s ")
                            + String.join(", ", jobs.subList(0, Math.min(10, jobs.size())))
                            + (jobs.size() > 10 ? ", ..." : "") + ": report that id for the job");
                }
            }
            if (root.json()) {
                root.out().println(Json.pretty(ReportViews.allocation(u)));
            } else {
                root.out().print(ReportViews.text(u));
            }
            return 0;
        }
        if (!to.isAfter(from)) {
            throw new CliException("--until " + to + " is not after --since " + from);
        }
        UsageReport r = UsageReport.of(store, from, to, group);
        if (root.json()) {
            root.out().println(Json.pretty(ReportViews.report(r)));
        } else if (csv) {
            root.out().print(ReportViews.csv(r));
        } else {
            root.out().print(ReportViews.text(r));
            if (r.rows().isEmpty()) {
                root.out().println("No usage recorded in " + store.directory() + " for this period. The node's"
                        + " sampler is the console or the service (gpusched console, gpusched serve); gpusched demo"
                        + " replays scripted usage on a simulated node.");
            }
        }
        return 0;
    }

    /**
     * @return the usage of the one allocation job {@code jobId} ran as, or of a Slurm job's tracks added up; empty when
     *         none
     * @throws CliException when it ran as several it cannot show as one: they are named, one is to be given
     */
    private static Optional<AllocationUsage> ofJob(AccountingStore store, String jobId) {
        try {
            return AllocationUsage.findJob(store, jobId);
        } catch (AllocationUsage.JobRanAsSeveralException e) {
            throw new CliException(e.getMessage());
        }
    }

    /**
     * Root reads no accounting store another user may change: its records could be forged, or a file swapped for a
     * FIFO between the check and the open would hang this command (a state directory shared with a state group, whose
     * service keeps its accounting under {@code gpu.service.private_dir}).
     */
    private void refuseWhatOthersMayChange(Path store) {
        if (!StateDirectory.isRoot()) {
            return; // an ordinary user reads what that user could read anyway
        }
        StateDirectory.othersMayChange(store).ifPresent(why -> {
            throw new CliException("INSECURE_PERMISSIONS: root reads no accounting store another user may change: "
                    + why + ". Give the service's configuration (--config FILE, whose gpu.service.private_dir holds"
                    + " its accounting), or run gpusched report as the user who owns " + store,
                    ExitCode.NODE_UNREADABLE);
        });
    }

    /** @return where the node's accounting store lives: the state directory, or gpu.service.private_dir when set */
    private Path stateDirectory() {
        GpuConfig config = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        InventorySpec spec = root.simulate().map(InventorySpec::simulated).orElse(InventorySpec.AUTO);
        try (GpuInventory inv = spec.open(config)) {
            // the service's sampler writes under gpu.service.private_dir when the state directory is shared
            return config.service().privateDir(StateDirectory.forNode(root.stateDir().or(config::stateDir), inv));
        } catch (BackendUnavailableException e) {
            throw new CliException("no GPU backend is available here (" + String.join("; ", e.causes())
                    + "); use --simulate PROFILE for a simulated node's report, or --state-dir DIR",
                    ExitCode.NODE_UNREADABLE);
        }
    }

    /** @return a time, as {@link ReportTimes#parse} reads it */
    static Instant when(String option, String text, Instant now) {
        try {
            return ReportTimes.parse(option, text, now);
        } catch (IllegalArgumentException e) {
            throw new CliException(e.getMessage());
        }
    }

    private static String printable(String s) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length() && i < 64; i++) {
            char c = s.charAt(i);
            b.append(c < 0x20 || c > 0x7e ? String.format("\\u%04x", (int) c) : String.valueOf(c));
        }
        return b.toString();
    }
}
