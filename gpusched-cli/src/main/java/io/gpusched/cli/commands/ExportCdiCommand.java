package io.gpusched.cli.commands;

import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.CdiSpec;
import io.gpusched.cli.CliException;
import io.gpusched.cli.Node;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaEnvironment;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched export cdi}: the node's CDI spec, printed or written into a CDI directory. */
@Command(name = "cdi", description = {"Print this node's CDI spec (one per vendor), or write it into a CDI directory"
        + " (/etc/cdi or /var/run/cdi) with --write."})
public final class ExportCdiCommand implements Callable<Integer> {
    @ParentCommand
    ExportCommand export;

    @Option(names = "--write", paramLabel = "DIR", description = "write gpusched-<vendor>.<format> into DIR atomically")
    Path write;

    @Option(names = "--format", paramLabel = "json|yaml", defaultValue = "yaml", description = "json or yaml (default)")
    String format;

    @Option(names = "--dev-root", paramLabel = "DIR", defaultValue = "/dev",
            description = "where the GPU device nodes are (default /dev)")
    Path devRoot;

    @Option(names = "--nvidia-kind", paramLabel = "KIND", defaultValue = CdiOptions.NVIDIA_KIND,
            description = "CDI kind of NVIDIA GPUs (default nvidia.com/gpu)")
    String nvidiaKind;

    @Option(names = "--amd-kind", paramLabel = "KIND", defaultValue = CdiOptions.AMD_KIND,
            description = "CDI kind of AMD GPUs (default amd.com/gpu)")
    String amdKind;

    @Override
    public Integer call() {
        if (!format.equals("json") && !format.equals("yaml")) {
            throw new CliException("--format " + format + ": expected json or yaml (a .yml file is ignored by podman"
                    + " 4.3, so gpusched writes .yaml)");
        }
        List<CdiSpec> specs;
        try (Node.Hardware n = export.root().hardware()) { // the hardware only: no ledger made or read
            List<Path> mounts = n.inventory().devices().stream().filter(d -> d.vendor() == GpuVendor.NVIDIA)
                    .map(GpuDevice::driverVersion).flatMap(Optional::stream).findFirst()
                    .map(v -> CudaOutput.resolver(n.config()).driverLibraryMounts(v).stream()
                            .map(CudaEnvironment.Mount::source).toList())
                    .orElse(List.of());
            CdiOptions o = new CdiOptions(nvidiaKind, amdKind, devRoot,
                    Path.of(System.getProperty("gpusched.proc.root", "/proc")), mounts);
            specs = CdiSpec.of(n.inventory(), o);
        }
        for (CdiSpec s : specs) {
            if (write != null) {
                Path f = s.writeTo(write, format);
                export.root().out().println(Printable.escape("wrote " + f + " (cdiVersion " + s.cdiVersion() + ", "
                        + s.kind() + ": " + String.join(", ", s.deviceNames()) + ")"));
            } else {
                export.root().out().print(s.render(format));
            }
            s.notes().forEach(x -> export.root().err().println("note: " + Printable.escape(x)));
        }
        return 0;
    }
}
