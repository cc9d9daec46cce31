package io.gpusched.examples;

import io.gpusched.core.GpuException;
import io.gpusched.examples.cli.CliException;
import io.gpusched.examples.cli.Commands;
import io.gpusched.examples.cli.Node;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;

/** The {@code gpusched} command. Errors are one line and a non-zero exit code; {@code --verbose} adds the trace. */
@Command(name = "gpusched", mixinStandardHelpOptions = true, version = "gpusched 0.1.0",
        description = "Discover, allocate and fence the GPUs of this node.",
        subcommands = {Commands.Demo.class, Commands.ListGpus.class, Commands.Topo.class, Commands.Watch.class,
            Commands.Allocate.class, Commands.Release.class, Commands.Status.class, Commands.Run.class,
            Commands.Doctor.class, Commands.Plan.class})
public final class GpuschedCommand implements Callable<Integer> {

    @Option(names = "--simulate", paramLabel = "PROFILE", scope = ScopeType.INHERIT,
            description = "use a simulated node: dgx1-v100, dgx-h100, pcie-4xa10, mi210-8x, or a YAML node file")
    String simulate;

    @Option(names = "--config", paramLabel = "FILE", scope = ScopeType.INHERIT,
            description = "gpusched.yaml (gpu: strategy, backends, cuda_paths, ...)")
    Path config;

    @Option(names = "--state-dir", paramLabel = "DIR", scope = ScopeType.INHERIT,
            description = "where allocations are journaled (default $GPUSCHED_STATE_DIR or ~/.local/state/gpusched)")
    Path stateDir;

    @Option(names = "--json", scope = ScopeType.INHERIT, description = "print JSON")
    boolean json;

    @Option(names = "--verbose", scope = ScopeType.INHERIT, description = "print stack traces of errors")
    boolean verbose;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    PrintStream out = System.out;
    PrintStream err = System.err;

    @Override
    public Integer call() {
        spec.commandLine().usage(out);
        return 0;
    }

    /** @return the stream commands print to */
    public PrintStream out() {
        return out;
    }

    /** @return the stream commands print warnings to */
    public PrintStream err() {
        return err;
    }

    /** @return whether --json was given */
    public boolean json() {
        return json;
    }

    /** @return the --simulate profile */
    public Optional<String> simulate() {
        return Optional.ofNullable(simulate);
    }

    /** @return the --config file */
    public Optional<Path> config() {
        return Optional.ofNullable(config);
    }

    /** @return the state directory */
    public Path stateDir() {
        return Node.stateDir(Optional.ofNullable(stateDir));
    }

    /** Opens the node with the global options and an optional strategy override. */
    public Node open(Optional<String> strategy) {
        return Node.open(simulate(), config(), stateDir(), strategy);
    }

    /** @return a command line wired with gpusched's error handling, writing to the given streams */
    public static CommandLine commandLine(PrintStream out, PrintStream err) {
        GpuschedCommand root = new GpuschedCommand();
        root.out = out;
        root.err = err;
        CommandLine cl = new CommandLine(root);
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        cl.setExecutionExceptionHandler((ex, line, parsed) -> {
            int code = ex instanceof CliException c ? c.exitCode() : ex instanceof GpuException
                    || ex instanceof IllegalArgumentException ? 2 : 1;
            line.getErr().println("gpusched: " + (ex.getMessage() == null ? ex.toString() : ex.getMessage()));
            if (root.verbose) {
                ex.printStackTrace(line.getErr());
            }
            return code;
        });
        return cl;
    }

    /** @param args command-line arguments */
    public static void main(String[] args) {
        System.exit(commandLine(System.out, System.err).execute(args));
    }
}
