package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.Node;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.internal.Printable;
import io.gpusched.core.internal.TextFiles;
import io.gpusched.slurm.CpuLayout;
import io.gpusched.slurm.GresConfParser;
import io.gpusched.slurm.GresRecord;
import io.gpusched.slurm.SlurmGres;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched export slurm}: the node's gres.conf, its slurm.conf lines, or a check of an existing gres.conf. */
@Command(name = "slurm", description = {"Print this node's Slurm gres.conf (or, with --slurm-conf, the slurm.conf"
        + " lines it needs).",
    "With --check FILE, compare FILE with the node: one line per drift, exit 1 if any."})
public final class ExportSlurmCommand implements Callable<Integer> {
    @ParentCommand
    ExportCommand export;

    @Option(names = "--check", paramLabel = "FILE", description = "compare this gres.conf with the node")
    Path check;

    @Option(names = "--slurm-conf", description = "print GresTypes= and the node's NodeName ... Gres= line instead")
    boolean slurmConf;

    @Option(names = "--node-name", paramLabel = "NAME",
            description = "the node's Slurm name (default: short host name)")
    String nodeName;

    @Option(names = "--dev-root", paramLabel = "DIR", defaultValue = "/dev",
            description = "where the GPU device nodes are (default /dev)")
    Path devRoot;

    @Option(names = "--cores", paramLabel = "host|none", defaultValue = "host",
            description = "Cores= from this host's CPU layout (host) or none")
    String cores;

    @Override
    public Integer call() {
        CpuLayout layout = switch (cores) {
            case "host" -> CpuLayout.fromSysfs(Path.of("/sys"));
            case "none" -> CpuLayout.unknown();
            default -> throw new CliException("--cores " + cores + ": expected host or none");
        };
        SlurmGres gres;
        try (Node.Hardware n = export.root().hardware()) { // the hardware only: no ledger made or read
            gres = SlurmGres.of(n.inventory(), new SlurmGres.Options(devRoot, Path.of("/proc"), layout));
        }
        String node = nodeName != null ? nodeName : hostName();
        if (check != null) {
            // a regular file of at most 3 MiB, UTF-8: a FIFO, /dev/zero or a binary file is a bad file (exit 2)
            String text = TextFiles.readUtf8(check, "gres.conf");
            List<GresRecord> actual = GresConfParser.parse(text, Optional.of(node));
            List<String> drift = gres.check(actual);
            if (drift.isEmpty()) {
                export.root().out().println(Printable.escape(check + " matches the node (" + gres.devices().size()
                        + " GPUs, Gres=" + gres.gresValue() + ")"));
                return 0;
            }
            drift.forEach(d -> export.root().out().println(Printable.escape(check + ": " + d)));
            return ExitCode.FAILED.code();
        }
        if (slurmConf) {
            export.root().out().println(SlurmGres.GRES_TYPES);
            export.root().out().println(gres.nodeLine(node));
        } else {
            export.root().out().print(gres.gresConf());
        }
        return 0;
    }

    private static String hostName() {
        try {
            String h = InetAddress.getLocalHost().getHostName();
            int dot = h.indexOf('.');
            return dot > 0 ? h.substring(0, dot) : h;
        } catch (IOException e) {
            return "localhost";
        }
    }
}
