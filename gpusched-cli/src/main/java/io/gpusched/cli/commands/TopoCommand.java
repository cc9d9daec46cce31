package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.Tables;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched topo}. */
@Command(name = "topo", description = "The link matrix (like nvidia-smi topo -m) and NUMA nodes.")
public final class TopoCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        try (Node.Hardware n = root.hardware()) { // the hardware only: no ledger made or read
            if (root.json()) {
                root.out().println(Printable.escapeJson(Json.pretty(n.inventory().topology().links())));
            } else {
                root.out().print(Tables.topology(n.inventory().devices(), n.inventory().topology()));
            }
        }
        return 0;
    }
}
