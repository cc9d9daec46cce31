package io.gpusched.core;

import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finds and opens inventories: {@link #detect()} picks the best available {@link GpuInventoryProvider} on the class
 * path; {@link #simulated(String)} opens a simulated node, always available. Detection never silently simulates.
 */
public final class GpuInventories {
    private static final Logger LOG = LoggerFactory.getLogger(GpuInventories.class);

    /** Prefix of a backend name that asks for a simulated node: {@code simulated:dgx1-v100}. */
    public static final String SIMULATED_PREFIX = "simulated:";

    /**
     * What detection found for one provider.
     *
     * @param name      provider name
     * @param priority  provider priority
     * @param available whether it can serve
     * @param cause     why not, when unavailable
     */
    public record ProviderStatus(String name, int priority, boolean available, Optional<String> cause) {
    }

    private GpuInventories() {
    }

    /** @see #detect(GpuConfig) */
    public static GpuInventory detect() {
        return detect(GpuConfig.defaults());
    }

    /**
     * Opens the highest-priority available provider (or, when {@code gpu.backends} is set, the first available of
     * those, in that order; {@code simulated:PROFILE} there opens a simulated node).
     *
     * @throws BackendUnavailableException listing every provider tried and its cause
     */
    public static GpuInventory detect(GpuConfig config) {
        List<GpuInventoryProvider> providers = providers(Thread.currentThread().getContextClassLoader());
        List<String> causes = new ArrayList<>();
        List<Object> order = new ArrayList<>();
        if (config.backends().isEmpty()) {
            order.addAll(providers);
        } else {
            for (String name : config.backends()) {
                if (name.startsWith(SIMULATED_PREFIX)) {
                    order.add(name);
                    continue;
                }
                Optional<GpuInventoryProvider> p = providers.stream().filter(x -> x.name().equals(name)).findFirst();
                if (p.isPresent()) {
                    order.add(p.get());
                } else {
                    causes.add(name + ": no such provider on the class path (found "
                            + providers.stream().map(GpuInventoryProvider::name).toList() + ")");
                }
            }
        }
        for (Object o : order) {
            if (o instanceof String s) {
                return simulated(s.substring(SIMULATED_PREFIX.length()));
            }
            GpuInventoryProvider p = (GpuInventoryProvider) o;
            Optional<String> cause = safeCause(p);
            if (cause.isPresent()) {
                LOG.debug("inventory provider {} unavailable: {}", p.name(), cause.get());
                causes.add(p.name() + ": " + cause.get());
                continue;
            }
            try {
                GpuInventory inv = p.open(config);
                LOG.debug("opened inventory provider {} with {} devices", p.name(), inv.devices().size());
                return inv;
            } catch (RuntimeException e) {
                LOG.debug("inventory provider {} failed to open", p.name(), e);
                causes.add(p.name() + ": failed to open: " + e.getMessage());
            }
        }
        if (providers.isEmpty() && config.backends().isEmpty()) {
            causes.add("no inventory provider on the class path: add gpu-nvml (NVIDIA) or gpu-rocm (AMD), or use "
                    + "GpuInventories.simulated(...)");
        }
        throw new BackendUnavailableException("no GPU inventory backend is available on this host", causes, null);
    }

    /** @return every provider on the class path with its availability, highest priority first (for diagnostics) */
    public static List<ProviderStatus> providers() {
        List<ProviderStatus> out = new ArrayList<>();
        for (GpuInventoryProvider p : providers(Thread.currentThread().getContextClassLoader())) {
            Optional<String> cause = safeCause(p);
            out.add(new ProviderStatus(p.name(), p.priority(), cause.isEmpty(), cause));
        }
        return out;
    }

    private static Optional<String> safeCause(GpuInventoryProvider p) {
        try {
            return p.unavailabilityCause();
        } catch (RuntimeException | LinkageError e) {
            return Optional.of("probe failed: " + e);
        }
    }

    private static List<GpuInventoryProvider> providers(ClassLoader loader) {
        List<GpuInventoryProvider> out = new ArrayList<>();
        ServiceLoader<GpuInventoryProvider> sl = ServiceLoader.load(GpuInventoryProvider.class,
                loader != null ? loader : GpuInventories.class.getClassLoader());
        for (ServiceLoader.Provider<GpuInventoryProvider> p : sl.stream().toList()) {
            try {
                out.add(p.get());
            } catch (ServiceConfigurationError | LinkageError e) {
                LOG.debug("skipping inventory provider {}: {}", p.type().getName(), e.toString());
            }
        }
        out.sort(Comparator.comparingInt(GpuInventoryProvider::priority).reversed()
                .thenComparing(GpuInventoryProvider::name));
        return out;
    }

    /**
     * Opens a simulated node: a built-in profile ({@link #simulatedProfiles()}) or the path of a YAML node description.
     * When {@code $GPUSCHED_SIMULATED_HEALTH} names a file, the node follows it (GPUs lost and recovered from outside
     * the process, see {@link SimulatedGpuInventory#followHealthFile}).
     *
     * @throws IllegalArgumentException naming the valid profiles, for an unknown name that is not a file
     * @throws GpuConfigException       for an invalid YAML description
     */
    public static SimulatedGpuInventory simulated(String profileOrPath) {
        SimulatedGpuInventory inv;
        Path p = Path.of(profileOrPath);
        if (NodeDescriptions.PROFILES.contains(profileOrPath)) {
            inv = NodeDescriptions.profile(profileOrPath);
        } else if (profileOrPath.endsWith(".yaml") || profileOrPath.endsWith(".yml") || profileOrPath.contains("/")
                || Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            // a path (a FIFO, a device or a directory included): read, or refused, as a file, naming what it is
            inv = NodeDescriptions.load(p);
        } else {
            inv = NodeDescriptions.profile(profileOrPath);
        }
        String healthFile = System.getenv(SimulatedGpuInventory.HEALTH_FILE_ENV);
        if (healthFile != null && !healthFile.isBlank()) {
            inv.followHealthFile(Path.of(healthFile), Duration.ofMillis(200));
        }
        return inv;
    }

    /** @return the built-in simulated profiles: dgx1-v100, dgx-h100, pcie-4xa10, mi210-8x */
    public static List<String> simulatedProfiles() {
        return NodeDescriptions.PROFILES;
    }
}
