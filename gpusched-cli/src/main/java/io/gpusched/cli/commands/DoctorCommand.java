package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.internal.Json;
import io.gpusched.nvml.Wsl2;
import io.gpusched.server.DoctorReport;
import io.gpusched.yarn.NodeManagerHeartbeat;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched doctor}: prints {@link DoctorReport}. */
@Command(name = "doctor", description = "What works here, what does not, and what to do about it.")
public final class DoctorCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        List<Path> extra = new ArrayList<>();
        root.config().map(GpuConfig::load).ifPresent(c -> extra.addAll(c.cudaPaths()));
        DoctorReport r = DoctorReport.collect(extra);
        PrintStream out = root.out();
        if (root.json()) {
            out.println(Json.pretty(r));
            return 0;
        }
        out.println("Inventory providers (highest priority first):");
        for (DoctorReport.Provider p : r.providers()) {
            out.println("  " + (p.available() ? "[ok]  " : "[--]  ") + p.name() + " (priority " + p.priority()
                    + ")" + (p.cause() == null ? ": available" : ": " + p.cause()));
            if (p.advice() != null) {
                out.println("        -> " + p.advice());
            }
        }
        if (r.providers().stream().noneMatch(DoctorReport.Provider::available)) {
            out.println("  -> no backend works here; gpusched --simulate dgx1-v100 ... runs on a simulated node");
        }
        Wsl2.detect(Path.of("/")).ifPresent(w -> {
            out.println("WSL2: " + w.describe());
            w.limitations().forEach(l -> out.println("  [--]  " + l));
        });
        DoctorReport.Isolation iso = r.isolation();
        out.println("Isolation:");
        out.println("  cgroup v1 devices: " + (iso.v1Root() == null ? "not mounted" : iso.v1Root()));
        out.println("  cgroup v2:         " + (iso.v2Root() == null ? "not mounted" : iso.v2Root()));
        out.println("  " + (iso.available() ? "[ok]  available (" + iso.mechanism() + " by default)"
                : "[--]  unavailable: " + iso.cause() + "\n        -> run as root on a host with a cgroup v1 devices"
                        + " hierarchy or cgroup2, or use gpusched run --no-isolation"));
        out.println("CUDA (driver " + (r.driver() == null ? "not loaded" : r.driver()) + "):");
        if (r.cuda().isEmpty()) {
            out.println("  none found in /usr/local/cuda*, /opt/cuda, /usr/lib/cuda, CUDA_HOME, CUDA_PATH"
                    + " -> install a toolkit or add its path to gpu.cuda_paths");
        }
        for (DoctorReport.Cuda c : r.cuda()) {
            out.println("  " + c.root() + (c.aliases().isEmpty() ? "" : " (also " + c.aliases() + ")") + ": CUDA "
                    + (c.version() == null ? "?" : c.version()) + " from "
                    + (c.versionSource() == null ? "?" : c.versionSource()) + (c.runtime() ? ", runtime" : "")
                    + (c.nvcc() ? ", nvcc" : ""));
            out.println("        " + c.verdict());
        }
        r.cudaProblems().forEach(p -> out.println("  problem: " + p));
        yarn(out);
        return 0;
    }

    /** The YARN NodeManager beside this node's ledger, when there is one or its containers' records (issue 32). */
    private void yarn(PrintStream out) {
        Node.Read r;
        try {
            r = root.readLedger();
        } catch (RuntimeException e) { // no backend or no ledger here: nothing to say about YARN
            return;
        }
        Optional<NodeManagerHeartbeat> hb = NodeManagerHeartbeat.read(r.stateDirectory());
        List<Allocation> live = r.ledger().allocations();
        long records = live.stream().filter(a -> a.request().labels().containsKey(YarnContainerGpus.LABEL)).count();
        if (hb.isEmpty() && records == 0) {
            return;
        }
        out.println("YARN (node ledger " + r.stateDirectory() + "): " + records + " allocation" + (records == 1 ? ""
                : "s") + " of YARN containers");
        hb.ifPresent(h -> out.println(h.running() ? "  [ok]  NodeManager pid " + h.pid() + " runs (heartbeat every "
                + h.every().toMillis() + " ms)"
                : "  [--]  no NodeManager runs; the last, pid " + h.pid() + " on "
                        + h.host() + ", wrote its heartbeat at " + h.at()));
        YarnOutlived.note(root, r.stateDirectory(), live).ifPresent(t -> out.println("  [--]  " + t));
    }
}
