package io.gpusched.flink;

import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.host.ProcessGpus;
import io.gpusched.core.host.StateDirectory;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Optional;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;

/**
 * gpusched's settings as Flink parameters of the external resource, {@code external-resource.<name>.param.<key>}:
 * {@code state-dir} (node ledger; default: the {@link StateDirectory} rule, {@code $GPUSCHED_STATE_DIR}, else
 * {@code /var/lib/gpusched} for root, else {@code ~/.local/state/gpusched}, a simulated node under
 * {@code <base>/simulated/<profile>}), {@code inventory} (an {@link InventorySpec}: {@code auto},
 * {@code simulated:<profile or YAML path>}, or provider names such as {@code nvml,procfs}), {@code strategy} ({@code
 * topology}, {@code packing}, {@code spreading}, {@code thermal}) and {@code memory-per-gpu} ({@code 16GB}, {@code
 * 16g}, {@code 16384} MiB).
 *
 * @param stateDir     the node ledger's directory given explicitly; empty for the {@link StateDirectory} rule
 * @param inventory    which inventory
 * @param strategy     strategy name
 * @param memoryPerGpu minimum memory per GPU
 */
public record FlinkGpuSettings(Optional<Path> stateDir, InventorySpec inventory, String strategy,
        Optional<MemorySize> memoryPerGpu) {

    private static ConfigOption<String> key(String k) {
        return ConfigOptions.key(k).stringType().noDefaultValue();
    }

    /**
     * @param c the resource's parameters
     * @return the settings
     * @throws IllegalArgumentException naming the parameter, its value and what would be valid
     */
    public static FlinkGpuSettings from(Configuration c) {
        String dir = c.getOptional(key("state-dir")).orElse("").trim();
        Optional<Path> stateDir;
        try {
            stateDir = dir.isEmpty() ? Optional.empty() : Optional.of(Path.of(dir));
        } catch (InvalidPathException e) {
            throw bad("state-dir", dir, "a directory path");
        }
        String inv = c.getOptional(key("inventory")).orElse("auto").trim();
        InventorySpec inventory;
        try {
            inventory = InventorySpec.parseKnown(inv);
        } catch (GpuConfigException e) {
            throw new IllegalArgumentException("external-resource.<name>.param.inventory: " + e.getMessage(), e);
        }
        String strategy = c.getOptional(key("strategy")).orElse("topology").trim();
        if (!AllocationStrategies.names().contains(strategy)) {
            throw bad("strategy", strategy, "one of " + AllocationStrategies.names());
        }
        Optional<MemorySize> mem = Optional.empty();
        String m = c.getOptional(key("memory-per-gpu")).orElse("").trim();
        if (!m.isEmpty()) {
            String norm = m.matches("(?i)[0-9]+[kmgt]") ? m + "B" : m;
            try {
                mem = Optional.of(MemorySize.parse(norm.toUpperCase(Locale.ROOT)));
            } catch (IllegalArgumentException e) {
                throw bad("memory-per-gpu", m, "a size such as 16GB, 16g or 16384 (MiB)");
            }
        }
        return new FlinkGpuSettings(stateDir, inventory, strategy, mem);
    }

    /** @return the node the TaskManager's holding comes from */
    ProcessGpus.NodeKey node() {
        return new ProcessGpus.NodeKey(inventory, stateDir, strategy);
    }

    private static IllegalArgumentException bad(String key, String value, String valid) {
        return new IllegalArgumentException("external-resource.<name>.param." + key + " = \"" + value
                + "\" is not valid; expected " + valid);
    }
}
