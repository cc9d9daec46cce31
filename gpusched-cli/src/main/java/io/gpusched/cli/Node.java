package io.gpusched.cli;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;

/**
 * What every command opens: the configuration, the node (simulated, or detected), and a scheduler whose node ledger lives
 * in the state directory, one per backend, so allocations made by one invocation are seen by the next.
 */
public final class Node implements AutoCloseable {
    private final GpuConfig config;
    private final GpuInventory inventory;
    private final GpuScheduler scheduler;
    private final Path journal;

    private Node(GpuConfig config, GpuInventory inventory, GpuScheduler scheduler, Path journal) {
        this.config = config;
        this.inventory = inventory;
        this.scheduler = scheduler;
        this.journal = journal;
    }

    /**
     * @return the state directory: {@code --state-dir}, else {@code $GPUSCHED_STATE_DIR}, else
     *         {@code /var/lib/gpusched} for root, else {@code $XDG_STATE_HOME/gpusched}, else
     *         {@code ~/.local/state/gpusched}
     */
    public static Path stateDir(Optional<Path> given) {
        return stateDir(given, System.getenv(), isRoot(), Path.of(System.getProperty("user.home")));
    }

    /** The default's rules, with the environment, the user and the home directory given (for tests). */
    static Path stateDir(Optional<Path> given, java.util.Map<String, String> env, boolean root, Path home) {
        if (given.isPresent()) {
            return given.get();
        }
        String explicit = env.get("GPUSCHED_STATE_DIR");
        if (explicit != null && !explicit.isBlank()) {
            return Path.of(explicit);
        }
        if (root) {
            return Path.of("/var/lib/gpusched");
        }
        String xdg = env.get("XDG_STATE_HOME");
        Path base = xdg != null && !xdg.isBlank() ? Path.of(xdg) : home.resolve(".local").resolve("state");
        return base.resolve("gpusched");
    }

    /** @return whether this process runs as root (the owner of /proc/self is the effective user) */
    static boolean isRoot() {
        try {
            return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (java.io.IOException | UnsupportedOperationException | IllegalArgumentException e) {
            return "root".equals(System.getProperty("user.name"));
        }
    }

    /**
     * Opens the node.
     *
     * @param simulate   a simulated profile or YAML path; empty: detect
     * @param configFile a gpusched.yaml
     * @param stateDir   where journals live
     * @param strategy   overrides gpu.strategy
     * @throws CliException when no backend is available (naming each cause and the --simulate way out)
     */
    public static Node open(Optional<String> simulate, Optional<Path> configFile, Path stateDir,
                            Optional<String> strategy) {
        return open(simulate, configFile, stateDir, strategy, Optional.empty());
    }

    /**
     * Opens the node with a listener for the scheduler's audit events.
     *
     * @param simulate   a simulated profile or YAML path; empty: detect
     * @param configFile a gpusched.yaml
     * @param stateDir   where the node ledger lives
     * @param strategy   overrides gpu.strategy
     * @param listener   receives allocation events (those of other processes too, once caught up)
     * @return the open node
     */
    public static Node open(Optional<String> simulate, Optional<Path> configFile, Path stateDir,
                            Optional<String> strategy, Optional<io.gpusched.core.AllocationListener> listener) {
        GpuConfig loaded = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        GpuConfig config = strategy.map(loaded::withStrategy).orElse(loaded);
        GpuInventory inventory;
        if (simulate.isPresent()) {
            inventory = GpuInventories.simulated(simulate.get());
        } else {
            try {
                inventory = GpuInventories.detect(config);
            } catch (BackendUnavailableException e) {
                throw new CliException("no GPU backend is available here (" + String.join("; ", e.causes())
                        + "); use --simulate dgx1-v100 (or another profile) to try gpusched without GPUs");
            }
        }
        String name = inventory.backend().replaceAll("[^A-Za-z0-9._-]", "_").toLowerCase(Locale.ROOT);
        Path ledger = stateDir.resolve(name);
        try {
            Files.createDirectories(ledger, java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                    java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        } catch (java.io.IOException e) {
            inventory.close();
            throw new CliException("cannot create the state directory " + ledger + ": " + e.getMessage());
        }
        GpuScheduler.Builder builder = GpuScheduler.builder().inventory(inventory).config(config).stateDir(ledger)
                .auditLogging(false).maintenanceInterval(Duration.ZERO);
        listener.ifPresent(builder::listener);
        GpuScheduler scheduler;
        try {
            scheduler = builder.build();
        } catch (RuntimeException e) {
            inventory.close();
            throw e;
        }
        scheduler.updateMetrics(inventory.sample());
        return new Node(config, inventory, scheduler, ledger);
    }

    /** @return the configuration */
    public GpuConfig config() {
        return config;
    }

    /** @return the inventory */
    public GpuInventory inventory() {
        return inventory;
    }

    /** @return the journaled scheduler */
    public GpuScheduler scheduler() {
        return scheduler;
    }

    /** @return the node ledger's directory (one per backend under the state directory) */
    public Path journal() {
        return journal;
    }

    @Override
    public void close() {
        scheduler.close();
        inventory.close();
    }
}
