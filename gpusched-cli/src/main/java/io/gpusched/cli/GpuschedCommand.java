package io.gpusched.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.commands.AllocateCommand;
import io.gpusched.cli.commands.CancelCommand;
import io.gpusched.cli.commands.DemoCommand;
import io.gpusched.cli.commands.DoctorCommand;
import io.gpusched.cli.commands.EnvCommand;
import io.gpusched.cli.commands.ExportCommand;
import io.gpusched.cli.commands.JobsCommand;
import io.gpusched.cli.commands.K8sDevicePluginCommand;
import io.gpusched.cli.commands.ListCommand;
import io.gpusched.cli.commands.LogsCommand;
import io.gpusched.cli.commands.PlanCommand;
import io.gpusched.cli.commands.QueueCommand;
import io.gpusched.cli.commands.ReleaseCommand;
import io.gpusched.cli.commands.RenewCommand;
import io.gpusched.cli.commands.ReportCommand;
import io.gpusched.cli.commands.RunCommand;
import io.gpusched.cli.commands.SelftestCommand;
import io.gpusched.cli.commands.ServeCommand;
import io.gpusched.cli.commands.StatusCommand;
import io.gpusched.cli.commands.TopoCommand;
import io.gpusched.cli.commands.WatchCommand;
import io.gpusched.client.NodeClient;
import io.gpusched.client.NodeServiceException;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.LedgerException;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.internal.AsciiNumbers;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaResolutionException;
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
            AllocateCommand.class, ReleaseCommand.class, RenewCommand.class, StatusCommand.class, RunCommand.class,
            JobsCommand.class, LogsCommand.class, CancelCommand.class, QueueCommand.class,
            DoctorCommand.class, SelftestCommand.class, PlanCommand.class, ServeCommand.class,
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
    Map<String, String> environment = System.getenv();

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

    /** @return the environment the command was started with (its own, or a test's) */
    public Map<String, String> environment() {
        return environment;
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

    /** @return the node's configuration and inventory, without its ledger (nothing made, read or written there) */
    public Node.Hardware hardware() {
        return Node.hardware(simulate(), config());
    }

    /** @return the node's devices, read without taking the node's lock or writing anything */
    public Node.Devices readDevices() {
        return Node.readDevices(simulate(), config(), stateDir());
    }

    /**
     * @param options what only a local ledger follows ({@code --strategy}, {@code --no-isolation}, ...)
     * @return the client this command works against: the node service when one answers, else the local ledger, by
     *         {@link NodeClients}' rule
     */
    public NodeClient client(LocalOptions options) {
        return NodeClients.open(this, options);
    }

    /** @return the client this command works against, with no local option (see {@link #client(LocalOptions)}) */
    public NodeClient client() {
        return client(LocalOptions.NONE);
    }

    /** Opens the node with a listener for the scheduler's audit events. */
    public Node open(Optional<String> strategy, AllocationListener listener) {
        return Node.open(simulate(), config(), stateDir(), strategy, Optional.of(listener));
    }

    /** @return a command line wired with gpusched's error handling, writing to the given streams */
    public static CommandLine commandLine(PrintStream out, PrintStream err) {
        return commandLine(out, err, System.getenv());
    }

    /**
     * @param environment the environment the command sees ({@code GPUSCHED_SOCKET}, a job's environment, ...)
     * @return a command line wired with gpusched's error handling, writing to the given streams
     */
    public static CommandLine commandLine(PrintStream out, PrintStream err, Map<String, String> environment) {
        GpuschedCommand root = new GpuschedCommand();
        root.out = out;
        root.err = err;
        root.environment = Map.copyOf(environment);
        CommandLine cl = new CommandLine(root);
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        cl.setExecutionExceptionHandler((ex, line, parsed) -> {
            int code = ex instanceof CliException c ? c.exitCode() : ExitCode.of(ex).code();
            String message = ex.getMessage() == null ? ex.toString() : ex.getMessage();
            if (ex instanceof GpuAllocationException g) {
                message = g.reason().name() + ": " + message; // the code scripts test, as the README promises
            } else if (ex instanceof LedgerException l) {
                message = l.kind().name() + ": " + message;
            } else if (ex instanceof CudaResolutionException) {
                message = NO_MATCHING_CUDA + ": " + message;
            } else if (ex instanceof NodeServiceException n) {
                message = n.reason() + ": " + message;
            }
            // a message may quote what a user, a file or a device reported: shown escaped, on one line
            message = Printable.escape(message);
            line.getErr().println("gpusched: " + message);
            if (root.verbose) {
                ex.printStackTrace(line.getErr());
            }
            if (root.json) {
                jsonError(out, message, code);
            }
            return code;
        });
        // whole numbers in options: ASCII digits only (picocli's own converter, Integer.valueOf, reads "٣" as 3)
        cl.registerConverter(Integer.class, GpuschedCommand::wholeNumber);
        cl.registerConverter(Integer.TYPE, GpuschedCommand::wholeNumber);
        // a usage error (unknown option, bad value, an option twice) is one line on stderr naming the error and where
        // the usage is, not the whole usage; with --json, stdout also gets the error as JSON, so that
        // `gpusched ... --json | jq` always reads a JSON document
        cl.setParameterExceptionHandler((ex, args) -> {
            CommandLine bad = ex.getCommandLine();
            String message = Printable.escape(ex.getMessage());
            bad.getErr().println("gpusched: " + message + " (usage: " + bad.getCommandSpec().qualifiedName()
                    + " --help)");
            if (root.verbose) {
                ex.printStackTrace(bad.getErr());
            }
            int code = bad.getCommandSpec().exitCodeOnInvalidInput();
            if (Arrays.asList(args).contains("--json")) {
                jsonError(out, message, code);
            }
            return code;
        });
        // every subcommand answers --help (and -h) with its usage, as the root does
        withHelp(cl);
        return cl;
    }

    /** The reason printed before a {@code --cuda} requirement no installation meets. */
    static final String NO_MATCHING_CUDA = "NO_MATCHING_CUDA";

    private static Integer wholeNumber(String text) {
        try {
            return AsciiNumbers.parseInt(text, 0, Integer.MAX_VALUE, "");
        } catch (IllegalArgumentException e) {
            throw new CommandLine.TypeConversionException(e.getMessage());
        }
    }

    /** Every subcommand, at any depth ({@code export slurm}), answers --help and -h. */
    private static void withHelp(CommandLine cl) {
        cl.getSubcommands().values().forEach(sub -> {
            if (!sub.getCommandSpec().mixinStandardHelpOptions()) {
                sub.getCommandSpec().mixinStandardHelpOptions(true);
            }
            withHelp(sub);
        });
    }

    /** Prints {@code {"error": message, "exitCode": code}} as one line of JSON. */
    private static void jsonError(PrintStream out, String message, int code) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("error", message);
        e.put("exitCode", code);
        try {
            out.println(Printable.escapeJson(new ObjectMapper().writeValueAsString(e)));
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
