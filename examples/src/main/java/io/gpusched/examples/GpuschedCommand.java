package io.gpusched.examples;

import java.io.PrintStream;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** The {@code gpusched} command. Errors are one line and a non-zero exit code; {@code --verbose} adds the trace. */
@Command(name = "gpusched", mixinStandardHelpOptions = true, version = "gpusched 0.1.0",
        description = "Discover, allocate and fence the GPUs of this node.",
        subcommands = {GpuschedCommand.DemoCommand.class})
public final class GpuschedCommand implements Callable<Integer> {

    @Option(names = "--simulate", paramLabel = "PROFILE",
            description = "use a simulated node: dgx1-v100, dgx-h100, pcie-4xa10, mi210-8x, or a YAML node file")
    String simulate;

    @Option(names = "--verbose", description = "print stack traces of errors")
    boolean verbose;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    PrintStream out = System.out;

    @Override
    public Integer call() {
        spec.commandLine().usage(spec.commandLine().getOut());
        return 0;
    }

    /** {@code gpusched demo}: the README's first command. */
    @Command(name = "demo", description = "Detect the node (or simulate one), show it, allocate and release.")
    static final class DemoCommand implements Callable<Integer> {
        @CommandLine.ParentCommand
        GpuschedCommand parent;

        @Override
        public Integer call() {
            return Demo.run(parent.out, Optional.ofNullable(parent.simulate));
        }
    }

    /** @return a command line wired with gpusched's error handling, writing to the given streams */
    public static CommandLine commandLine(PrintStream out, PrintStream err) {
        GpuschedCommand root = new GpuschedCommand();
        root.out = out;
        CommandLine cl = new CommandLine(root);
        cl.setOut(new java.io.PrintWriter(out, true));
        cl.setErr(new java.io.PrintWriter(err, true));
        cl.setExecutionExceptionHandler((ex, line, parsed) -> {
            line.getErr().println("gpusched: " + ex.getMessage());
            if (root.verbose) {
                ex.printStackTrace(line.getErr());
            }
            return 2;
        });
        return cl;
    }

    /** @param args command-line arguments */
    public static void main(String[] args) {
        System.exit(commandLine(System.out, System.err).execute(args));
    }
}
