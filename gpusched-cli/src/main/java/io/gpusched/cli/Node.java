package io.gpusched.cli;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.NodeLedgerView;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.host.GpuNode;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.host.StateDirectory;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What every command opens: the configuration and the node through gpu-core's {@link GpuNode}, so the command uses
 * the same node ledger as every other process of the node (the library, the console, the engines): the state
 * directory is {@code --state-dir} as given, else the {@link StateDirectory} rule ({@code $GPUSCHED_STATE_DIR}, else
 * {@code /var/lib/gpusched} for root, else the XDG state home; a {@code --simulate}d node under
 * {@code <that>/simulated/<profile>}).
 */
public final class Node implements AutoCloseable {
    private final GpuConfig config;
    private final GpuNode node;

    private Node(GpuConfig config, GpuNode node) {
        this.config = config;
        this.node = node;
    }

    /**
     * Opens the node.
     *
     * @param simulate   a simulated profile or YAML path; empty: detect
     * @param configFile a gpusched.yaml
     * @param stateDir   {@code --state-dir}; empty: the {@link StateDirectory} rule
     * @param strategy   overrides gpu.strategy
     * @param listener   receives allocation events (those of other processes too, once caught up)
     * @return the open node
     * @throws CliException when no backend is available (naming each cause and the --simulate way out)
     */
    public static Node open(Optional<String> simulate, Optional<Path> configFile, Optional<Path> stateDir,
            Optional<String> strategy, Optional<AllocationListener> listener) {
        GpuConfig loaded = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        GpuConfig config = strategy.map(loaded::withStrategy).orElse(loaded);
        GpuNode.Builder b = GpuNode.builder()
                .inventory(simulate.map(InventorySpec::simulated).orElse(InventorySpec.AUTO))
                .config(config).stateDir(stateDir).auditLogging(false).maintenanceInterval(Duration.ZERO);
        listener.ifPresent(b::listener);
        GpuNode node;
        try {
            node = b.build();
        } catch (BackendUnavailableException e) {
            throw noBackend(e);
        }
        try {
            node.scheduler().updateMetrics(node.inventory().sample());
        } catch (RuntimeException e) {
            node.close();
            throw e;
        }
        return new Node(config, node);
    }

    private static CliException noBackend(BackendUnavailableException e) {
        return new CliException("no GPU backend is available here (" + String.join("; ", e.causes())
                + "); use --simulate dgx1-v100 (or another profile) to try gpusched without GPUs",
                ExitCode.NODE_UNREADABLE);
    }

    /**
     * What {@link #read} found: the configuration, the state directory and the ledger as read.
     *
     * @param config         the configuration
     * @param stateDirectory the node ledger's state directory
     * @param ledger         the ledger's allocations
     */
    public record Read(GpuConfig config, Path stateDirectory, NodeLedgerView ledger) {
    }

    /**
     * Reads the node ledger without opening a scheduler: no lock taken, nothing written, so any user who may read the
     * state directory can (a YARN container is never the NodeManager's user). Same options and directory rule as
     * {@link #open}.
     *
     * @throws CliException when no backend is available
     * @throws io.gpusched.core.LedgerException when the ledger cannot be read (naming the path and what would work)
     */
    public static Read read(Optional<String> simulate, Optional<Path> configFile, Optional<Path> stateDir) {
        GpuConfig config = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        try (GpuInventory inv = openInventory(simulate, config)) {
            Path dir = StateDirectory.forNode(stateDir.or(config::stateDir), inv);
            return new Read(config, dir, NodeLedgerView.read(dir, inv));
        }
    }

    /**
     * What {@link #readDevices} found.
     *
     * @param devices     the devices: holders and pools as the ledger records them, health and one sample from the
     *                    inventory
     * @param allocations the live allocations the ledger records (none when there is no ledger yet)
     * @param backend     the inventory's backend
     */
    public record Devices(List<DeviceState> devices, List<Allocation> allocations, String backend) {
    }

    /**
     * The node's devices for read-only commands ({@code list}): the ledger read as {@link #read} does (no lock, nothing
     * created or written: a state directory or ledger that does not exist yet means nothing is allocated), with the
     * inventory's health and one sample of its metrics.
     *
     * @throws CliException when no backend is available
     * @throws io.gpusched.core.LedgerException when an existing ledger cannot be read
     */
    public static Devices readDevices(Optional<String> simulate, Optional<Path> configFile, Optional<Path> stateDir) {
        GpuConfig config = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        try (GpuInventory inv = openInventory(simulate, config)) {
            Path dir = StateDirectory.forNode(stateDir.or(config::stateDir), inv);
            List<DeviceState> states;
            List<Allocation> live;
            if (Files.exists(dir.resolve("ledger"), LinkOption.NOFOLLOW_LINKS)) {
                NodeLedgerView view = NodeLedgerView.read(dir, inv);
                states = view.devices();
                live = view.allocations();
            } else {
                states = new ArrayList<>();
                for (GpuDevice d : inv.devices()) {
                    states.add(DeviceState.idle(d, inv.health(d)));
                }
                live = List.of();
            }
            Map<Integer, GpuMetrics> metrics = new HashMap<>();
            for (GpuMetrics m : inv.sample().metrics()) {
                metrics.put(m.index(), m);
            }
            List<DeviceState> out = new ArrayList<>(states.size());
            for (DeviceState s : states) {
                out.add(new DeviceState(s.device(), s.health(), s.exclusiveHolder(), s.sharedHolders(),
                        s.sharedReserved(), Optional.ofNullable(metrics.get(s.index())), s.pool(), s.poolReason(),
                        s.poolSince()));
            }
            return new Devices(out, live, inv.backend());
        }
    }

    /**
     * The node's configuration and inventory, for a command that reads the hardware only ({@code topo},
     * {@code export}): no state directory is made or read, no lock taken, nothing written.
     *
     * @param config    the configuration
     * @param inventory the node's inventory (closed with this)
     */
    public record Hardware(GpuConfig config, GpuInventory inventory) implements AutoCloseable {
        @Override
        public void close() {
            inventory.close();
        }
    }

    /**
     * @param simulate   a simulated profile or node file; empty: detect
     * @param configFile a gpusched.yaml
     * @return the node's configuration and inventory, opened without its ledger
     */
    public static Hardware hardware(Optional<String> simulate, Optional<Path> configFile) {
        GpuConfig config = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        return new Hardware(config, openInventory(simulate, config));
    }

    private static GpuInventory openInventory(Optional<String> simulate, GpuConfig config) {
        try {
            return simulate.map(InventorySpec::simulated).orElse(InventorySpec.AUTO).open(config);
        } catch (BackendUnavailableException e) {
            throw noBackend(e);
        }
    }

    /** @return the configuration */
    public GpuConfig config() {
        return config;
    }

    /** @return the inventory */
    public GpuInventory inventory() {
        return node.inventory();
    }

    /** @return the scheduler over the node ledger */
    public GpuScheduler scheduler() {
        return node.scheduler();
    }

    /** @return the node ledger's state directory */
    public Path stateDirectory() {
        return node.stateDirectory().orElseThrow();
    }

    @Override
    public void close() {
        node.close();
    }
}
