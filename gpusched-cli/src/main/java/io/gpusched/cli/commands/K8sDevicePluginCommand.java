package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.kubernetes.AdvertisedResource;
import io.gpusched.kubernetes.DevicePluginConfig;
import io.gpusched.kubernetes.KubeletDevicePlugin;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched k8s-device-plugin}: the kubelet device plug-in over this node's GPUs until SIGTERM. When no GPU
 * backend is available it says why, advertises nothing and tries again; it does not exit (no silent crash loop).
 */
@Command(name = "k8s-device-plugin", description = "Serve this node's GPUs to the kubelet as a device plug-in"
        + " (v1beta1: ListAndWatch with health, GetPreferredAllocation by gpusched's topology search, Allocate) until"
        + " SIGTERM; re-registers on every kubelet restart.")
public final class K8sDevicePluginCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Option(names = "--device-plugin-dir", paramLabel = "DIR", defaultValue = "/var/lib/kubelet/device-plugins",
            description = "the kubelet's device-plugin directory, holding kubelet.sock (default ${DEFAULT-VALUE})")
    Path directory;

    @Option(names = "--nvidia-resource", defaultValue = "nvidia.com/gpu",
            description = "resource name of NVIDIA GPUs (default ${DEFAULT-VALUE})")
    String nvidiaResource;

    @Option(names = "--amd-resource", defaultValue = "amd.com/gpu",
            description = "resource name of AMD GPUs and partitions (default ${DEFAULT-VALUE})")
    String amdResource;

    @Option(names = "--mig-strategy", defaultValue = "mixed", description = "mixed: each MIG profile is its own"
            + " resource (nvidia.com/mig-1g.10gb); single: MIG devices are the NVIDIA resource (default"
            + " ${DEFAULT-VALUE})")
    String migStrategy;

    @Option(names = "--replicas", defaultValue = "1",
            description = "time-slicing: advertise each GPU N times. Containers"
                    + " sharing a GPU get NO memory isolation and no fault isolation (default ${DEFAULT-VALUE}: none)")
    int replicas;

    @Option(names = "--cdi", description = "answer Allocate with CDI device names (<kind>=<uuid>) instead of device"
            + " nodes; needs a CDI spec on the node and Kubernetes 1.31+ (or the DevicePluginCDIDevices gate)")
    boolean cdi;

    @Option(names = "--nvidia-cdi-kind", defaultValue = "nvidia.com/gpu", description = "CDI kind of NVIDIA devices")
    String nvidiaCdiKind;

    @Option(names = "--amd-cdi-kind", defaultValue = "amd.com/gpu", description = "CDI kind of AMD devices")
    String amdCdiKind;

    @Option(names = "--objective", defaultValue = "set", description = "what preferred allocations maximize: set (the"
            + " set's own links) or remaining (what stays free for the next pod) (default ${DEFAULT-VALUE})")
    String objective;

    @Option(names = "--dev-root", defaultValue = "/dev", description = "where the host's /dev is seen (default"
            + " ${DEFAULT-VALUE})")
    Path devRoot;

    @Option(names = "--proc-root", defaultValue = "/proc", description = "where the host's /proc is seen (default"
            + " ${DEFAULT-VALUE})")
    Path procRoot;

    @Option(names = "--recovery-hold", defaultValue = "10s", description = "how long a recovered GPU must stay healthy"
            + " before it is advertised Healthy again (default ${DEFAULT-VALUE})")
    String recoveryHold;

    @Option(names = "--inventory", paramLabel = "SPEC", defaultValue = "auto",
            description = "which GPUs: auto (the best"
                    + " available backend), simulated:<profile|node.yaml>, or provider names in order, e.g. nvml,procfs"
                    + " (default ${DEFAULT-VALUE}; the global --simulate P is simulated:P)")
    String inventorySpec;

    @Option(names = "--retry", defaultValue = "30s", description = "wait between tries when no GPU backend is available"
            + " (default ${DEFAULT-VALUE})")
    String retry;

    private final CountDownLatch stop = new CountDownLatch(1);
    private final CountDownLatch stopped = new CountDownLatch(1);
    /** Counted down once the plug-in serves (tests running the command in-process). */
    final CountDownLatch started = new CountDownLatch(1);

    @Override
    public Integer call() throws InterruptedException, IOException {
        DevicePluginConfig config = config();
        // Netty warns on every accepted Unix-socket connection that SO_KEEPALIVE (which gRPC's server sets) does not
        // apply to it; on a device plug-in that is one WARN per kubelet call
        for (String bootstrap : new String[]{"ServerBootstrap", "Bootstrap"}) {
            String key = "org.slf4j.simpleLogger.log.io.grpc.netty.shaded.io.netty.bootstrap." + bootstrap;
            if (System.getProperty(key) == null) {
                System.setProperty(key, "error");
            }
        }
        Duration retryEvery = duration("--retry", retry);
        if (Files.exists(directory) && !Files.isDirectory(directory)) {
            throw new CliException("--device-plugin-dir " + directory + " is not a directory: give the kubelet's"
                    + " device-plugin directory, the one holding kubelet.sock (default"
                    + " /var/lib/kubelet/device-plugins)");
        }
        Thread hook = new Thread(() -> {
            stop.countDown();
            try {
                stopped.await(20, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "gpusched-k8s-stop");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            GpuInventory inventory = openInventory(retryEvery);
            if (inventory == null) {
                return 0;
            }
            try (inventory; KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inventory, config)) {
                for (AdvertisedResource r : plugin.resources()) {
                    root.out().println("gpusched k8s-device-plugin: serving " + r.name() + " (" + r.devices().size()
                            + " devices) on " + config.pluginDirectory().resolve(r.socketName()) + " for "
                            + inventory.backend());
                }
                if (plugin.resources().isEmpty()) {
                    root.out().println("gpusched k8s-device-plugin: " + inventory.backend() + " has no device this"
                            + " plug-in can advertise; advertising nothing");
                }
                config.sharingWarning().ifPresent(w -> root.err().println("warning: " + w));
                root.out().flush();
                started.countDown();
                stop.await();
            }
            root.out().println("gpusched k8s-device-plugin: stopped");
            return 0;
        } finally {
            stopped.countDown();
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // the hook is what stopped us
            }
        }
    }

    /** @return the node's inventory, waiting for a backend while none is available; null when stopped first */
    private GpuInventory openInventory(Duration retryEvery) throws InterruptedException {
        InventorySpec spec = root.simulate().map(InventorySpec::simulated).orElseGet(() -> InventorySpec.parse(
                inventorySpec));
        GpuConfig gpu = root.config().map(GpuConfig::load).orElse(GpuConfig.defaults());
        while (true) {
            try {
                return spec.open(gpu);
            } catch (BackendUnavailableException e) {
                root.err().println("gpusched k8s-device-plugin: no GPU backend is available, advertising nothing"
                        + " (trying again in " + retry + "): " + e.getMessage());
                root.err().flush();
                started.countDown();
                if (stop.await(retryEvery.toMillis(), TimeUnit.MILLISECONDS)) {
                    return null;
                }
            }
        }
    }

    private DevicePluginConfig config() {
        try {
            DevicePluginConfig.MigStrategy mig = switch (migStrategy.toLowerCase(Locale.ROOT)) {
                case "mixed" -> DevicePluginConfig.MigStrategy.MIXED;
                case "single" -> DevicePluginConfig.MigStrategy.SINGLE;
                default -> throw new CliException("--mig-strategy " + migStrategy + ": valid are mixed, single");
            };
            TopologyAwareStrategy.Objective o = switch (objective.toLowerCase(Locale.ROOT)) {
                case "set" -> TopologyAwareStrategy.Objective.SET;
                case "remaining" -> TopologyAwareStrategy.Objective.REMAINING;
                default -> throw new CliException("--objective " + objective + ": valid are set, remaining");
            };
            return DevicePluginConfig.builder().pluginDirectory(directory).nvidiaResource(nvidiaResource)
                    .amdResource(amdResource).migStrategy(mig).replicas(replicas).cdi(cdi)
                    .nvidiaCdiKind(nvidiaCdiKind).amdCdiKind(amdCdiKind).objective(o).devRoot(devRoot)
                    .procRoot(procRoot).recoveryHold(duration("--recovery-hold", recoveryHold)).build();
        } catch (IllegalArgumentException e) {
            throw new CliException(e.getMessage());
        }
    }

    private static Duration duration(String option, String value) {
        try {
            return Durations.parse(value);
        } catch (IllegalArgumentException e) {
            throw new CliException(option + ": " + e.getMessage());
        }
    }

    /** Stops a running plug-in (tests). */
    public void stop() {
        stop.countDown();
    }
}
