package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.internal.Json;
import io.gpusched.nvml.Wsl2;
import io.gpusched.server.DoctorReport;
import io.gpusched.service.Protection;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
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
        GpuConfig cfg = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        Protection shared = Protection.check(cfg, Path.of("/dev"), Path.of("/proc"));
        out.println("Shared node (logins off the GPUs): " + shared.verdict());
        shared.loginFence().forEach(l -> out.println("  login fence: " + l));
        shared.deviceFiles().forEach(l -> out.println("  " + l));
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
        return 0;
    }
}
