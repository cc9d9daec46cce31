package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.GpuScheduler;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched status}. */
@Command(name = "status", description = "Who holds what, and free memory.")
public final class StatusCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Override
    public Integer call() {
        try (Node n = root.open(Optional.empty())) {
            GpuScheduler s = n.scheduler();
            if (root.json()) {
                root.out().println(s.statusJson());
                return 0;
            }
            var st = s.status();
            root.out().println("Backend " + st.backend() + ", strategy " + st.strategy() + ", "
                    + st.allocations().size() + " allocations (ledger " + n.stateDirectory() + ")");
            root.out().print(ListCommand.table(s.devices()));
            for (var h : st.allocations()) {
                root.out().println(h.id() + "  GPUs " + h.deviceIndices() + "  " + h.sharing()
                        + (h.owner() == null ? "" : "  owner " + h.owner())
                        + (h.jobId() == null ? "" : "  job " + h.jobId())
                        + (h.expiresAt() == null ? "" : "  lease until " + h.expiresAt()));
            }
            st.notes().forEach(note -> root.out().println("note: " + note));
            YarnOutlived.note(root, n.stateDirectory(), s.allocations()).ifPresent(t -> root.out().println("note: "
                    + t));
        }
        return 0;
    }
}
