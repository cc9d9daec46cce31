package io.gpusched.core.host;

import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GroupResolver;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One node as a host process opens it: the inventory (from an {@link InventorySpec}), the node ledger's state
 * directory (by the {@link StateDirectory} rule, so that the CLI, the console and every engine on the node share one
 * ledger), and a scheduler over both. Closing the node closes the scheduler, then the inventory it opened.
 *
 * <pre>{@code
 * try (GpuNode node = GpuNode.builder().inventory("auto").build()) {      // the node ledger at the default place
 *     Allocation a = node.scheduler().allocate(request);
 * }
 * }</pre>
 */
public final class GpuNode implements AutoCloseable {
    private final InventorySpec spec;
    private final GpuInventory inventory;
    private final boolean ownsInventory;
    private final GpuScheduler scheduler;
    private final Optional<Path> stateDirectory;

    private GpuNode(InventorySpec spec, GpuInventory inventory, boolean ownsInventory, GpuScheduler scheduler,
            Optional<Path> stateDirectory) {
        this.spec = spec;
        this.inventory = inventory;
        this.ownsInventory = ownsInventory;
        this.scheduler = scheduler;
        this.stateDirectory = stateDirectory;
    }

    /** @return a builder: inventory {@code auto}, the default state directory, the default configuration */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the spec the inventory was opened from ({@code auto} when an open inventory was given) */
    public InventorySpec spec() {
        return spec;
    }

    /** @return the node's inventory */
    public GpuInventory inventory() {
        return inventory;
    }

    /** @return the scheduler over the node ledger */
    public GpuScheduler scheduler() {
        return scheduler;
    }

    /** @return the state directory of the node ledger; empty for an in-memory node */
    public Optional<Path> stateDirectory() {
        return stateDirectory;
    }

    /** Closes the scheduler and, when this node opened it, the inventory. */
    @Override
    public void close() {
        try {
            scheduler.close();
        } finally {
            if (ownsInventory) {
                inventory.close();
            }
        }
    }

    @Override
    public String toString() {
        return "GpuNode[" + inventory.backend() + ", " + stateDirectory.map(Path::toString).orElse("in memory") + "]";
    }

    /** Builds a {@link GpuNode}; each setter may be called once. */
    public static final class Builder {
        private InventorySpec spec;
        private GpuInventory inventory;
        private Path stateDir;
        private boolean inMemory;
        private GpuConfig config;
        private String strategy;
        private Duration maintenance;
        private Boolean auditLogging;
        private Duration metricsPoll;
        private GroupResolver groups;
        private final List<AllocationListener> listeners = new ArrayList<>();

        private Builder() {
        }

        private static void once(Object current, String what) {
            if (current != null) {
                throw new IllegalStateException(what + " was already set to " + current);
            }
        }

        /**
         * @param v an inventory spec ({@code auto}, {@code simulated:dgx1-v100}, {@code nvml,procfs})
         * @return this
         * @throws io.gpusched.core.GpuConfigException for an invalid spec, naming the valid forms
         */
        public Builder inventory(String v) {
            return inventory(InventorySpec.parse(v));
        }

        /** @param v the inventory to open @return this */
        public Builder inventory(InventorySpec v) {
            once(spec, "the inventory spec");
            once(inventory, "the inventory");
            spec = Objects.requireNonNull(v, "spec");
            return this;
        }

        /** @param v an inventory the caller opened (and closes: the node does not) @return this */
        public Builder inventory(GpuInventory v) {
            once(spec, "the inventory spec");
            once(inventory, "the inventory");
            inventory = Objects.requireNonNull(v, "inventory");
            return this;
        }

        /** @param v the state directory, used as it is (else the {@link StateDirectory} rule) @return this */
        public Builder stateDir(Path v) {
            once(stateDir, "the state directory");
            if (inMemory) {
                throw new IllegalStateException("the node was set to in memory; it has no state directory");
            }
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /** @param v the state directory, or empty for the {@link StateDirectory} rule @return this */
        public Builder stateDir(Optional<Path> v) {
            v.ifPresent(this::stateDir);
            return this;
        }

        /** No node ledger: allocations live in this process only (other processes do not see them). @return this */
        public Builder inMemory() {
            if (stateDir != null) {
                throw new IllegalStateException("a state directory was set (" + stateDir + "); cannot be in memory");
            }
            inMemory = true;
            return this;
        }

        /** @param v the configuration ({@code gpu.*}) @return this */
        public Builder config(GpuConfig v) {
            once(config, "the configuration");
            config = Objects.requireNonNull(v, "config");
            return this;
        }

        /** @param v a strategy name overriding {@code gpu.strategy} @return this */
        public Builder strategy(String v) {
            once(strategy, "the strategy");
            strategy = Objects.requireNonNull(v, "strategy");
            return this;
        }

        /** @param v receives the scheduler's audit events @return this */
        public Builder listener(AllocationListener v) {
            listeners.add(Objects.requireNonNull(v, "listener"));
            return this;
        }

        /** @param v whether the default audit logger is on (default: the scheduler's default) @return this */
        public Builder auditLogging(boolean v) {
            once(auditLogging, "audit logging");
            auditLogging = v;
            return this;
        }

        /** @param v maintenance interval (leases, drain, reclaim); {@code ZERO}: none @return this */
        public Builder maintenanceInterval(Duration v) {
            once(maintenance, "the maintenance interval");
            maintenance = Objects.requireNonNull(v, "maintenanceInterval");
            return this;
        }

        /**
         * @param v the groups of a request's owner, for per-group quotas (the node service gives its callers')
         * @return this
         */
        public Builder groups(GroupResolver v) {
            once(groups, "the group resolver");
            groups = Objects.requireNonNull(v, "groups");
            return this;
        }

        /** @param v how often the scheduler polls the inventory's metrics @return this */
        public Builder metricsPollInterval(Duration v) {
            once(metricsPoll, "the metrics poll interval");
            metricsPoll = Objects.requireNonNull(v, "metricsPollInterval");
            return this;
        }

        /**
         * Opens the inventory (when a spec was given), resolves the state directory and builds the scheduler. On any
         * failure what was opened is closed again.
         *
         * @return the open node
         * @throws io.gpusched.core.BackendUnavailableException when the spec's providers cannot serve
         * @throws io.gpusched.core.LedgerException when the state directory cannot be used (naming why)
         */
        public GpuNode build() {
            GpuConfig base = config != null ? config : GpuConfig.defaults();
            GpuConfig cfg = strategy != null ? base.withStrategy(strategy) : base;
            boolean owns = inventory == null;
            InventorySpec s = spec != null ? spec : InventorySpec.AUTO;
            GpuInventory inv = owns ? s.open(cfg) : inventory;
            try {
                Optional<Path> dir = inMemory ? Optional.empty()
                        : Optional.of(StateDirectory.forNode(Optional.ofNullable(stateDir)
                                .or(cfg::stateDir), inv));
                GpuScheduler.Builder b = GpuScheduler.builder().inventory(inv).config(cfg);
                dir.ifPresent(b::stateDir);
                if (maintenance != null) {
                    b.maintenanceInterval(maintenance);
                }
                if (auditLogging != null) {
                    b.auditLogging(auditLogging);
                }
                if (metricsPoll != null) {
                    b.metricsPollInterval(metricsPoll);
                }
                listeners.forEach(b::listener);
                if (groups != null) {
                    b.groups(groups);
                }
                GpuScheduler scheduler = b.build();
                return new GpuNode(owns ? s : InventorySpec.AUTO, inv, owns, scheduler, dir);
            } catch (RuntimeException e) {
                if (owns) {
                    inv.close();
                }
                throw e;
            }
        }
    }
}
