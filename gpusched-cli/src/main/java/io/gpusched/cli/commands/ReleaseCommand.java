package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.client.NodeClient;
import io.gpusched.core.internal.Printable;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched release}. */
@Command(name = "release", description = "Release allocations.")
public final class ReleaseCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Parameters(paramLabel = "ID", arity = "1..*", description = "allocation id; several are released together"
            + " (one ledger write, none when one of them was never issued)")
    List<String> ids;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            if (ids.size() == 1) {
                String id = ids.get(0);
                boolean released = n.release(id);
                root.out().println(released ? "released " + Printable.escape(id)
                        : Printable.escape(id) + " was already released");
            } else {
                int released = 0;
                for (String id : ids) {
                    released += n.release(id) ? 1 : 0;
                }
                root.out().println("released " + released + " of " + ids.size() + ": "
                        + Printable.escape(String.join(" ", ids))
                        + (released < ids.size() ? " (the others were already released)" : ""));
            }
        }
        return 0;
    }
}
