package io.gpusched.cli.commands;

import io.gpusched.cli.Demo;
import io.gpusched.cli.GpuschedCommand;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched demo}: the README's first command. */
@Command(name = "demo", description = "Detect the node (or simulate one), show it, allocate and release.")
public final class DemoCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        return Demo.run(root.out(), root.simulate(), root.stateDir());
    }
}
