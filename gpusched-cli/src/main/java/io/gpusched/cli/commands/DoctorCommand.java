package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.NvidiaDriver;
import io.gpusched.cuda.Compatibility;
import io.gpusched.cuda.CompatibilityTable;
import io.gpusched.cuda.CudaInstallation;
import io.gpusched.cuda.CudaInstallations;
import io.gpusched.cuda.CudaSearch;
import io.gpusched.cuda.DriverVersion;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched doctor}. */
@Command(name = "doctor", description = "What works here, what does not, and what to do about it.")
public final class DoctorCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        PrintStream out = root.out();
        out.println("Inventory providers (highest priority first):");
        boolean any = false;
        for (GpuInventories.ProviderStatus p : GpuInventories.providers()) {
            any |= p.available();
            out.println("  " + (p.available() ? "[ok]  " : "[--]  ") + p.name() + " (priority " + p.priority()
                    + ")" + p.cause().map(c -> ": " + c).orElse(": available"));
            p.cause().flatMap(DoctorCommand::advice).ifPresent(a -> out.println("        -> " + a));
        }
        if (!any) {
            out.println("  -> no backend works here; gpusched --simulate dgx1-v100 ... runs on a simulated node");
        }
        List<GpuDevice> devices = List.of();
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.detect(devices);
        out.println("Isolation:");
        out.println("  cgroup v1 devices: " + iso.v1Root().map(Path::toString).orElse("not mounted"));
        out.println("  cgroup v2:         " + iso.v2Root().map(Path::toString).orElse("not mounted"));
        out.println("  " + iso.unavailabilityCause().map(c -> "[--]  unavailable: " + c + "\n        -> run as"
                + " root on a host with a cgroup v1 devices hierarchy or cgroup2, or use gpusched run"
                + " --no-isolation").orElse("[ok]  available (" + (iso.v2Root().isPresent() ? "v2 eBPF" : "v1")
                + " by default)"));
        List<Path> extra = new ArrayList<>();
        root.config().map(io.gpusched.core.GpuConfig::load).ifPresent(c -> extra.addAll(c.cudaPaths()));
        CudaInstallations.Discovery d = CudaInstallations.discover(CudaSearch.host(extra));
        Optional<DriverVersion> driver = NvidiaDriver.loadedVersion(Path.of("/proc")).map(DriverVersion::parse);
        out.println("CUDA (driver " + driver.map(Object::toString).orElse("not loaded") + "):");
        if (d.installations().isEmpty()) {
            out.println("  none found in /usr/local/cuda*, /opt/cuda, /usr/lib/cuda, CUDA_HOME, CUDA_PATH"
                    + " -> install a toolkit or add its path to gpu.cuda_paths");
        }
        CompatibilityTable table = CompatibilityTable.builtIn();
        for (CudaInstallation i : d.installations()) {
            String verdict = i.version().map(v -> driver.map(dv -> {
                Compatibility c = Compatibility.judge(table, v, dv, Optional.empty(), i.compatDir(), true);
                return c.verdict() + ": " + c.message();
            }).orElse("no NVIDIA driver is loaded, so it cannot be checked")).orElse("version unknown");
            out.println("  " + i.root() + (i.aliases().isEmpty() ? "" : " (also " + i.aliases() + ")") + ": CUDA "
                    + i.version().map(Object::toString).orElse("?") + " from " + i.versionSource().map(Enum::name)
                    .orElse("?") + (i.hasRuntime() ? ", runtime" : "") + (i.nvcc().isPresent() ? ", nvcc" : ""));
            out.println("        " + verdict);
        }
        d.problems().forEach(p -> out.println("  problem: " + p));
        return 0;
    }

    static Optional<String> advice(String cause) {
        if (cause.contains("driver not loaded")) {
            return Optional.of("load the NVIDIA kernel module (nvidia-smi must work), or use --simulate");
        }
        if (cause.contains("library not found")) {
            return Optional.of("install the driver's user-space library, or point -Dgpusched.nvml.library at it");
        }
        if (cause.contains("amdgpu")) {
            return Optional.of("load amdgpu (modprobe amdgpu) on AMD hosts; ignore on NVIDIA hosts");
        }
        if (cause.contains("no permission")) {
            return Optional.of("run as a user allowed to open /dev/nvidiactl");
        }
        return Optional.empty();
    }
}
