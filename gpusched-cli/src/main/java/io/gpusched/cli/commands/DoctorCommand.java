package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaInstallation;
import io.gpusched.nvml.Wsl2;
import io.gpusched.server.DoctorReport;
import io.gpusched.service.Protection;
import io.gpusched.yarn.NodeManagerHeartbeat;
import io.gpusched.yarn.YarnContainerGpus;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched doctor}: prints {@link DoctorReport}. With {@code --simulate}, the simulated node comes first and
 * CUDA is judged against its GPUs' driver; the host's providers follow, marked as not used. Every text a provider, a
 * file or a device reported is escaped.
 */
@Command(name = "doctor", description = "What works here, what does not, and what to do about it.")
public final class DoctorCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        List<Path> extra = new ArrayList<>();
        GpuConfig config = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        extra.addAll(config.cudaPaths());
        DoctorReport r;
        if (root.simulate().isPresent()) {
            try (GpuInventory inv = InventorySpec.simulated(root.simulate().get()).open(config)) {
                r = DoctorReport.collect(extra, inv);
            }
        } else {
            r = DoctorReport.collect(extra);
        }
        PrintStream out = root.out();
        if (root.json()) {
            out.println(Printable.escapeJson(Json.pretty(r)));
            return 0;
        }
        boolean simulated = r.node() != null && r.node().simulated();
        if (simulated) {
            out.println("Node: simulated (" + e(r.node().backend()) + "), " + r.node().gpus() + " GPUs, "
                    + (r.node().driver() == null ? "no NVIDIA driver named"
                            : "NVIDIA driver " + e(r.node().driver()))
                    + " (from the node description)");
            out.println("  [ok]  gpusched uses the simulated node; this host's GPUs and providers are not used");
        }
        out.println(simulated ? "This host's inventory providers (not used by the simulated node):"
                : "Inventory providers (highest priority first):");
        for (DoctorReport.Provider p : r.providers()) {
            out.println("  " + (p.available() ? "[ok]  " : "[--]  ") + e(p.name()) + " (priority " + p.priority()
                    + ")" + (p.cause() == null ? ": available" : ": " + e(p.cause())));
            if (p.advice() != null && !simulated) {
                out.println("        -> " + e(p.advice()));
            }
        }
        if (!simulated && r.providers().stream().noneMatch(DoctorReport.Provider::available)) {
            out.println("  -> no backend works here; gpusched --simulate dgx1-v100 ... runs on a simulated node");
        }
        Wsl2.detect(Path.of("/")).ifPresent(w -> {
            out.println("WSL2: " + e(w.describe()));
            w.limitations().forEach(l -> out.println("  [--]  " + e(l)));
        });
        DoctorReport.Isolation iso = r.isolation();
        out.println(simulated ? "Isolation (this host's cgroups: gpusched run fences them on a simulated node too):"
                : "Isolation:");
        out.println("  cgroup v1 devices: " + (iso.v1Root() == null ? "not mounted" : e(iso.v1Root())));
        out.println("  cgroup v2:         " + (iso.v2Root() == null ? "not mounted" : e(iso.v2Root())));
        out.println("  " + (iso.available() ? "[ok]  available (" + iso.mechanism() + " by default)"
                : "[--]  unavailable: " + e(iso.cause()) + "\n        -> run as root on a host with a cgroup v1"
                        + " devices hierarchy or cgroup2, or use gpusched run --no-isolation"));
        GpuConfig cfg = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        Protection shared = Protection.check(cfg, Path.of("/dev"), Path.of("/proc"));
        out.println("Shared node (logins off the GPUs): " + e(shared.verdict()));
        shared.loginFence().forEach(l -> out.println("  login fence: " + e(l)));
        shared.deviceFiles().forEach(l -> out.println("  " + e(l)));
        out.println("CUDA (" + (simulated ? "judged against the simulated node's driver " : "driver ")
                + (r.driver() == null ? "not loaded" : e(r.driver())) + "):");
        if (r.cuda().isEmpty()) {
            out.println("  none found in /usr/local/cuda*, /opt/cuda, /usr/lib/cuda, CUDA_HOME, CUDA_PATH"
                    + " -> install a toolkit or add its path to gpu.cuda_paths");
        }
        for (DoctorReport.Cuda c : r.cuda()) {
            out.println("  " + e(c.root()) + (c.aliases().isEmpty() ? "" : " (also " + e(c.aliases().toString())
                    + ")") + ": CUDA " + (c.version() == null ? "?" : e(c.version())) + " from "
                    + source(c.versionSource()) + (c.runtime() ? ", runtime" : "") + (c.nvcc() ? ", nvcc" : ""));
            out.println("        " + e(c.verdict()));
        }
        r.cudaProblems().forEach(p -> out.println("  problem: " + e(p)));
        DoctorReport.Uvm uvm = r.uvm();
        if (uvm.checked()) {
            out.println("NVIDIA unified memory (nvidia-uvm):");
            out.println(uvm.problem() == null ? "  [ok]  loaded (major " + uvm.major() + "), /dev/nvidia-uvm and"
                    + " /dev/nvidia-uvm-tools present"
                    : "  [--]  " + e(uvm.problem()) + "\n        -> " + e(uvm.advice()));
        }
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
        long records = live.stream().filter(YarnContainerGpus::isContainerRecord).count();
        if (hb.isEmpty() && records == 0) {
            return;
        }
        out.println("YARN (node ledger " + e(r.stateDirectory().toString()) + "): " + records + " allocation"
                + (records == 1 ? "" : "s") + " of YARN containers");
        hb.ifPresent(h -> out.println(h.running() ? "  [ok]  NodeManager pid " + h.pid() + " runs (heartbeat every "
                + h.every().toMillis() + " ms)"
                : "  [--]  no NodeManager runs; the last, pid " + h.pid() + " on "
                        + e(h.host()) + ", wrote its heartbeat at " + h.at()));
        YarnOutlived.note(root, r.stateDirectory(), live).ifPresent(t -> out.println("  [--]  " + e(t)));
    }

    private static String e(String s) {
        return Printable.escape(s);
    }

    /** @return where a version was read, as a person names it ({@code include/cuda.h}), not the enum's name */
    private static String source(String name) {
        return Arrays.stream(CudaInstallation.VersionSource.values()).filter(v -> v.name().equals(name))
                .map(CudaInstallation.VersionSource::label).findFirst().orElse(name == null ? "?" : e(name));
    }
}
