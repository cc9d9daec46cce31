package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched export}: configuration other programs read, generated from this node. */
@Command(name = "export", description = "Write configuration for other programs from this node's GPUs.",
        subcommands = {ExportSlurmCommand.class, ExportCdiCommand.class})
public final class ExportCommand implements Runnable {
    @ParentCommand
    GpuschedCommand root;

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    /** @return the root command */
    GpuschedCommand root() {
        return root;
    }

    @Override
    public void run() {
        spec.commandLine().usage(root.out());
    }
}
