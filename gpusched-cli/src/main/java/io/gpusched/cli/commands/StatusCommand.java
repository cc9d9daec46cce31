package io.gpusched.cli.commands;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.core.GpuScheduler;
import java.time.Instant;
import java.util.Map;
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
            Map<String, IdleStatus> idle = IdleStatus.read(AccountingStore.at(n.stateDirectory()), Instant.now());
            for (var h : st.allocations()) {
                root.out().println(h.id() + "  GPUs " + h.deviceIndices() + "  " + h.sharing()
                        + (h.owner() == null ? "" : "  owner " + h.owner())
                        + (h.jobId() == null ? "" : "  job " + h.jobId())
                        + (h.expiresAt() == null ? "" : "  lease until " + h.expiresAt())
                        + (idle.containsKey(h.id()) ? "  " + idle.get(h.id()).describe() : ""));
            }
            st.notes().forEach(note -> root.out().println("note: " + note));
        }
        return 0;
    }
}
