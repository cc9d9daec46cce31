package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.NodeClient;
import io.gpusched.core.internal.Printable;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched release}. */
@Command(name = "release", description = "Release an allocation.")
public final class ReleaseCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", description = "allocation id")
    String id;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            boolean released = n.release(id);
            root.out().println(released ? "released " + Printable.escape(id)
                    : Printable.escape(id) + " was already released");
        }
        return 0;
    }
}
