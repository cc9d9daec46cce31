package io.gpusched.cli.commands;

import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.IdleStatus;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.JsonViews;
import io.gpusched.cli.Node;
import io.gpusched.client.NodeClient;
import io.gpusched.client.NodeStatus;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
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

    private String idleNote;

    @Override
    public Integer call() {
        try (NodeClient n = root.client()) {
            NodeStatus st = n.status();
            if (root.json()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("backend", st.node().backend());
                m.put("enabled", st.node().enabled());
                m.put("strategy", st.node().strategy());
                m.put("at", st.at());
                m.put("devices", JsonViews.devices(st.devices()));
                m.put("allocations", JsonViews.allocations(st.allocations()));
                m.put("drainSupported", st.node().drainSupported());
                m.put("notes", st.node().notes());
                root.out().println(Printable.escapeJson(Json.pretty(m)));
                return 0;
            }
            // owners, jobs, device names and notes come from requests, node files and backends: each is escaped
            root.out().println("Backend " + Printable.escape(st.node().backend()) + ", strategy "
                    + st.node().strategy() + ", " + st.allocations().size() + " allocations"
                    + st.node().stateDirectory().map(d -> " (ledger " + Printable.escape(String.valueOf(d)) + ")")
                            .orElse(""));
            root.out().print(ListCommand.table(st.devices()));
            Map<String, IdleStatus> idle = idle(st);
            for (var h : st.allocations()) {
                root.out().println(Printable.escape(h.id()) + "  GPUs " + h.devices() + "  " + h.sharing()
                        + (h.owner() == null ? "" : "  owner " + Printable.escape(h.owner()))
                        + (h.jobId() == null ? "" : "  job " + Printable.escape(h.jobId()))
                        + (h.expiresAt() == null ? "" : h.expired() ? "  lease expired at " + h.expiresAt()
                                + " (held until released or renewed)" : "  lease until " + h.expiresAt())
                        + (idle.containsKey(h.id()) ? "  " + idle.get(h.id()).describe() : ""));
            }
            st.node().notes().forEach(note -> root.out().println("note: " + Printable.escape(note)));
            if (idleNote != null) {
                root.out().println("note: " + Printable.escape(idleNote));
            }
            yarnNote().ifPresent(t -> root.out().println("note: " + Printable.escape(t)));
        }
        return 0;
    }

    /**
     * @return per allocation idle at the accounting store's last checkpoint, its state; empty where this user cannot
     *         read the store (the node service's ledger is root's) or the node has no ledger directory to show
     */
    private Map<String, IdleStatus> idle(NodeStatus st) {
        try {
            // the service's sampler writes under gpu.service.private_dir when the state directory is shared
            GpuConfig config = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
            Optional<AccountingStore> store = st.node().stateDirectory().map(d -> AccountingStore.at(
                    config.service().privateDir(Path.of(d))));
            if (store.isEmpty()) {
                return Map.of();
            }
            // root reads no store another user may change (forged figures; a FIFO swapped in would hang this)
            Optional<String> others = StateDirectory.isRoot() ? StateDirectory.othersMayChange(
                    store.get().directory()) : Optional.empty();
            if (others.isPresent()) {
                idleNote = "idle GPUs are not shown: root reads no accounting store another user may change ("
                        + others.get() + "); give the service's configuration (--config FILE, whose"
                        + " gpu.service.private_dir holds its accounting)";
                return Map.of();
            }
            return IdleStatus.read(store.get(), Instant.now());
        } catch (RuntimeException unreadable) {
            return Map.of();
        }
    }

    /**
     * @return what to say of allocations of YARN containers that outlive YARN (issue 32), read from this node's ledger
     *         where this user may read it; empty otherwise
     */
    private Optional<String> yarnNote() {
        try {
            Node.Read r = root.readLedger();
            return YarnOutlived.note(root, r.stateDirectory(), r.ledger().allocations());
        } catch (RuntimeException unreadable) {
            return Optional.empty();
        }
    }
}
