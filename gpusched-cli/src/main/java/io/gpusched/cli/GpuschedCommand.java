package io.gpusched.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.commands.AllocateCommand;
import io.gpusched.cli.commands.DemoCommand;
import io.gpusched.cli.commands.DoctorCommand;
import io.gpusched.cli.commands.EnvCommand;
import io.gpusched.cli.commands.ExportCommand;
import io.gpusched.cli.commands.K8sDevicePluginCommand;
import io.gpusched.cli.commands.ListCommand;
import io.gpusched.cli.commands.PlanCommand;
import io.gpusched.cli.commands.ReleaseCommand;
import io.gpusched.cli.commands.ReportCommand;
import io.gpusched.cli.commands.RunCommand;
import io.gpusched.cli.commands.ServeCommand;
import io.gpusched.cli.commands.StatusCommand;
import io.gpusched.cli.commands.TopoCommand;
import io.gpusched.cli.commands.WatchCommand;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.LedgerException;
import io.gpusched.server.ConsoleServer;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;

/** The {@code gpusched} command. Errors are one line and a non-zero exit code; {@code --verbose} adds the trace. */
@Command(name = "gpusched", mixinStandardHelpOptions = true, versionProvider = GpuschedCommand.Version.class,
        description = "Discover, allocate and fence the GPUs of this node.",
        subcommands = {DemoCommand.class, ListCommand.class, TopoCommand.class, WatchCommand.class,
            AllocateCommand.class, ReleaseCommand.class, StatusCommand.class, RunCommand.class,
            DoctorCommand.class, PlanCommand.class, ServeCommand.class,
            ExportCommand.class, EnvCommand.class, K8sDevicePluginCommand.class, ReportCommand.class})
public final class GpuschedCommand implements Callable<Integer> {

    @Option(names = "--simulate", paramLabel = "PROFILE", scope = ScopeType.INHERIT,
            description = "use a simulated node: dgx1-v100, dgx-h100, pcie-4xa10, mi210-8x, or a YAML node file")
    String simulate;

    @Option(names = "--config", paramLabel = "FILE", scope = ScopeType.INHERIT,
            description = "gpusched.yaml (gpu: strategy, backends, cuda_paths, ...)")
    Path config;

    @Option(names = "--state-dir", paramLabel = "DIR", scope = ScopeType.INHERIT,
            description = "the node ledger's directory, shared with every gpusched process of the node (default "
                    + "$GPUSCHED_STATE_DIR, else /var/lib/gpusched for root, else $XDG_STATE_HOME/gpusched or "
                    + "~/.local/state/gpusched; a --simulate'd node under <that>/simulated/<profile>)")
    Path stateDir;

    @Option(names = "--json", scope = ScopeType.INHERIT, description = "print JSON")
    boolean json;

    @Option(names = "--verbose", scope = ScopeType.INHERIT,
            description = "print stack traces of errors and the library's INFO logs")
    boolean verbose;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /**
     * {@code gpusched --version}: this build's version, from the build (Maven filters it into the console's resources,
     * see {@link ConsoleServer#version()}), not a literal.
     */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            return new String[]{"gpusched " + ConsoleServer.version()};
        }
    }

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

    /** @return whether --verbose was given */
    public boolean verbose() {
        return verbose;
    }

    /** @return {@code --state-dir} as given; empty: the node's default (see {@link Node}) */
    public Optional<Path> stateDir() {
        return Optional.ofNullable(stateDir);
    }

    /** Opens the node with the global options and an optional strategy override. */
    public Node open(Optional<String> strategy) {
        return Node.open(simulate(), config(), stateDir(), strategy, Optional.empty());
    }

    /** Reads the node ledger with the global options, without a scheduler (no lock, nothing written). */
    public Node.Read readLedger() {
        return Node.read(simulate(), config(), stateDir());
    }

    /** Opens the node with a listener for the scheduler's audit events. */
    public Node open(Optional<String> strategy, AllocationListener listener) {
        return Node.open(simulate(), config(), stateDir(), strategy, Optional.of(listener));
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
            String message = ex.getMessage() == null ? ex.toString() : ex.getMessage();
            if (ex instanceof GpuAllocationException g) {
                message = g.reason().name() + ": " + message; // the code scripts test, as the README promises
            } else if (ex instanceof LedgerException l) {
                message = l.kind().name() + ": " + message;
            }
            line.getErr().println("gpusched: " + message);
            if (root.verbose) {
                ex.printStackTrace(line.getErr());
            }
            if (root.json) {
                jsonError(out, message, code);
            }
            return code;
        });
        // a usage error (unknown option, bad value) keeps picocli's message and usage on stderr; with --json, stdout
        // also gets the error as JSON, so that `gpusched ... --json | jq` always reads a JSON document
        CommandLine.IParameterExceptionHandler usage = cl.getParameterExceptionHandler();
        cl.setParameterExceptionHandler((ex, args) -> {
            int code = usage.handleParseException(ex, args);
            if (Arrays.asList(args).contains("--json")) {
                jsonError(out, ex.getMessage(), code);
            }
            return code;
        });
        // every subcommand answers --help (and -h) with its usage, as the root does
        withHelp(cl);
        return cl;
    }

    /** Prints {@code {"error": message, "exitCode": code}} as one line of JSON. */
    /** Every subcommand, at any depth ({@code export slurm}), answers --help and -h. */
    private static void withHelp(CommandLine cl) {
        cl.getSubcommands().values().forEach(sub -> {
            if (!sub.getCommandSpec().mixinStandardHelpOptions()) {
                sub.getCommandSpec().mixinStandardHelpOptions(true);
            }
            withHelp(sub);
        });
    }

    private static void jsonError(PrintStream out, String message, int code) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("error", message);
        e.put("exitCode", code);
        try {
            out.println(new ObjectMapper().writeValueAsString(e));
        } catch (JsonProcessingException x) {
            throw new IllegalStateException(x);
        }
    }

    /**
     * Keeps the library's INFO logs out of a command's output: slf4j-simple logs at WARN unless {@code --verbose} is
     * among the arguments (or the level was set explicitly). Must run before the first logger is created.
     */
    static void quietLogs(String[] args) {
        String key = "org.slf4j.simpleLogger.defaultLogLevel";
        if (System.getProperty(key) == null) {
            System.setProperty(key, Arrays.asList(args).contains("--verbose") ? "info" : "warn");
        }
    }

    /** @param args command-line arguments */
    public static void main(String[] args) {
        quietLogs(args);
        System.exit(commandLine(System.out, System.err).execute(args));
    }
}
