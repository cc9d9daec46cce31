package io.gpusched.cli.commands;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.internal.Printable;
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
                root.out().println(Printable.escapeJson(s.statusJson()));
                return 0;
            }
            var st = s.status();
            // owners, jobs, device names and notes come from requests, node files and backends: each is escaped
            root.out().println("Backend " + Printable.escape(st.backend()) + ", strategy " + st.strategy() + ", "
                    + st.allocations().size() + " allocations (ledger "
                    + Printable.escape(n.stateDirectory().toString()) + ")");
            root.out().print(ListCommand.table(s.devices()));
            for (var h : st.allocations()) {
                root.out().println(Printable.escape(h.id()) + "  GPUs " + h.deviceIndices() + "  " + h.sharing()
                        + (h.owner() == null ? "" : "  owner " + Printable.escape(h.owner()))
                        + (h.jobId() == null ? "" : "  job " + Printable.escape(h.jobId()))
                        + (h.expiresAt() == null ? "" : h.expired() ? "  lease expired at " + h.expiresAt()
                                + " (held until released or renewed)" : "  lease until " + h.expiresAt()));
            }
            st.notes().forEach(note -> root.out().println("note: " + Printable.escape(note)));
        }
        return 0;
    }
}
