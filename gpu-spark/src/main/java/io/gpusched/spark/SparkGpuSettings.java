package io.gpusched.spark;

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
import org.apache.spark.SparkConf;

/**
 * gpusched's settings as Spark conf keys.
 *
 * <table>
 * <caption>Settings</caption>
 * <tr><th>key</th><th>default</th><th>meaning</th></tr>
 * <tr><td>{@code spark.gpusched.stateDir}</td><td>the {@link StateDirectory} rule ({@code $GPUSCHED_STATE_DIR},
 * else {@code /var/lib/gpusched} for root, else {@code ~/.local/state/gpusched}; a simulated node under
 * {@code <base>/simulated/<profile>})</td><td>the node ledger shared by every process of the node (the
 * {@code gpusched} command and the console included)</td></tr>
 * <tr><td>{@code spark.gpusched.inventory}</td><td>{@code auto}</td><td>an {@link InventorySpec}: {@code auto}
 * detects the node's GPUs; {@code simulated:<profile or YAML path>} serves a simulated node; {@code nvml,procfs}
 * names providers in order</td></tr>
 * <tr><td>{@code spark.gpusched.strategy}</td><td>{@code topology}</td><td>{@code topology}, {@code packing},
 * {@code spreading} or {@code thermal}</td></tr>
 * <tr><td>{@code spark.gpusched.memoryPerGpu}</td><td>none</td><td>minimum memory of each GPU ({@code 16g},
 * {@code 16GB}, {@code 16384} MiB)</td></tr>
 * <tr><td>{@code spark.gpusched.addresses}</td><td>{@code index}</td><td>{@code index} or {@code uuid}: how the
 * GPUs are named in Spark's resource addresses</td></tr>
 * <tr><td>{@code spark.gpusched.resourceName}</td><td>{@code gpu}</td><td>the Spark resource this plugin
 * serves</td></tr>
 * </table>
 *
 * @param resourceName  the Spark resource served
 * @param stateDir      the node ledger's directory given explicitly; empty for the {@link StateDirectory} rule
 * @param inventory     which inventory
 * @param strategy      strategy name
 * @param memoryPerGpu  minimum memory per GPU
 * @param addressByUuid whether addresses are UUIDs rather than indices
 */
public record SparkGpuSettings(String resourceName, Optional<Path> stateDir, InventorySpec inventory, String strategy,
        Optional<MemorySize> memoryPerGpu, boolean addressByUuid) {

    /** Key prefix of every setting. */
    public static final String PREFIX = "spark.gpusched.";

    /**
     * @param conf Spark's configuration
     * @return the settings
     * @throws IllegalArgumentException naming the key, the value and what would be valid
     */
    public static SparkGpuSettings from(SparkConf conf) {
        String resource = conf.get(PREFIX + "resourceName", "gpu").trim();
        if (resource.isEmpty()) {
            throw bad("resourceName", resource, "a Spark resource name such as gpu");
        }
        String dir = conf.get(PREFIX + "stateDir", "").trim();
        Optional<Path> stateDir;
        try {
            stateDir = dir.isEmpty() ? Optional.empty() : Optional.of(Path.of(dir));
        } catch (InvalidPathException e) {
            throw bad("stateDir", dir, "a directory path");
        }
        String inv = conf.get(PREFIX + "inventory", "auto").trim();
        InventorySpec inventory;
        try {
            inventory = InventorySpec.parseKnown(inv);
        } catch (GpuConfigException e) {
            throw new IllegalArgumentException(PREFIX + "inventory: " + e.getMessage(), e);
        }
        String strategy = conf.get(PREFIX + "strategy", "topology").trim();
        if (!AllocationStrategies.names().contains(strategy)) {
            throw bad("strategy", strategy, "one of " + AllocationStrategies.names());
        }
        Optional<MemorySize> mem = Optional.empty();
        String m = conf.get(PREFIX + "memoryPerGpu", "").trim();
        if (!m.isEmpty()) {
            // Spark writes sizes as 16g / 512m; gpusched as 16GB / 512MB / bare MiB.
            String norm = m.matches("(?i)[0-9]+[kmgt]") ? m + "B" : m;
            try {
                mem = Optional.of(MemorySize.parse(norm.toUpperCase(Locale.ROOT)));
            } catch (IllegalArgumentException e) {
                throw bad("memoryPerGpu", m, "a size such as 16g, 16GB or 16384 (MiB)");
            }
        }
        String addr = conf.get(PREFIX + "addresses", "index").trim().toLowerCase(Locale.ROOT);
        if (!addr.equals("index") && !addr.equals("uuid")) {
            throw bad("addresses", addr, "index or uuid");
        }
        return new SparkGpuSettings(resource, stateDir, inventory, strategy, mem, addr.equals("uuid"));
    }

    /** @return the node this JVM's holdings come from */
    ProcessGpus.NodeKey node() {
        return new ProcessGpus.NodeKey(inventory, stateDir, strategy);
    }

    private static IllegalArgumentException bad(String key, String value, String valid) {
        return new IllegalArgumentException(PREFIX + key + " = \"" + value + "\" is not valid; expected " + valid);
    }
}
