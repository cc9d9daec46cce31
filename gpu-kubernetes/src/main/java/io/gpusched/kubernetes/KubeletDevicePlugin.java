package io.gpusched.kubernetes;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import java.io.IOException;
import java.nio.file.ClosedWatchServiceException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardWatchEventKinds;
import java.nio.file.WatchService;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A kubelet device plug-in over one node's {@link GpuInventory}: one gRPC server per advertised resource on its own
 * Unix
 * socket in the device-plugin directory, registered with the kubelet's {@code kubelet.sock}.
 *
 * <p>Life cycle. A registrar thread (never a gRPC thread: the kubelet's Register does not return until it has dialled
 * back and called GetDevicePluginOptions) serves each resource's socket first, then registers it. It watches the
 * directory: when {@code kubelet.sock} is created again (a restarting kubelet deletes every socket there) or a
 * plug-in socket disappears, it shuts the old servers down (closing one deletes its socket file, so before serving the
 * new) and serves and registers again, on every kubelet restart. A refused or failed registration is retried after
 * {@link DevicePluginConfig#registerRetry()}. {@link #close()} stops everything (what SIGTERM runs).
 *
 * <p>Health. One log line per device health change; Unhealthy is advertised at once, Healthy again only after the
 * device
 * has read healthy for {@link DevicePluginConfig#recoveryHold()} (no flapping); ListAndWatch sends a new full list on
 * every change of what it advertises.
 */
public final class KubeletDevicePlugin implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(KubeletDevicePlugin.class);
    private static final Duration REGISTER_DEADLINE = Duration.ofSeconds(10);

    private final GpuInventory inventory;
    private final DevicePluginConfig config;
    private final List<AdvertisedResource> resources;
    private final List<ResourceService> services = new CopyOnWriteArrayList<>();
    private final UnixSockets sockets;
    private final ExecutorService grpcExecutor;
    private final ScheduledExecutorService timers;
    private final Map<String, GpuHealth> health = new ConcurrentHashMap<>();
    private final Map<String, Boolean> advertised = new ConcurrentHashMap<>();
    private final Map<String, AtomicLong> generation = new ConcurrentHashMap<>();
    private final GpuHealthListener listener = this::onHealthChange;
    private final List<Server> servers = new ArrayList<>();
    private final AtomicInteger registrations = new AtomicInteger();
    private final WatchService watch;
    private final Thread registrar;
    private volatile boolean closed;

    private KubeletDevicePlugin(GpuInventory inventory, DevicePluginConfig config) throws IOException {
        this.inventory = inventory;
        this.config = config;
        List<String> notes = new ArrayList<>();
        List<GpuDevice> devices = inventory.devices();
        this.resources = ResourcePlan.plan(devices, config, notes);
        notes.forEach(n -> LOG.warn("{}", n));
        config.sharingWarning().ifPresent(w -> LOG.warn("{}", w));
        if (resources.isEmpty()) {
            LOG.warn("inventory {} has {} devices and none can be advertised: the plug-in advertises nothing",
                    inventory.backend(), devices.size());
        }
        this.sockets = new UnixSockets("gpusched-k8s");
        this.grpcExecutor = Executors.newCachedThreadPool(UnixSockets.daemon("gpusched-k8s-grpc"));
        this.timers = Executors.newSingleThreadScheduledExecutor(UnixSockets.daemon("gpusched-k8s-health"));
        // listen before reading, so that a change in between is not lost (an event heard first wins)
        inventory.addHealthListener(listener);
        for (GpuDevice d : devices) {
            GpuHealth h;
            try {
                h = inventory.health(d);
            } catch (RuntimeException e) {
                h = GpuHealth.lost("health could not be read: " + e.getMessage());
            }
            health.putIfAbsent(d.uuid(), h);
            advertised.putIfAbsent(d.uuid(), health.get(d.uuid()).isHealthy());
            if (!h.isHealthy()) {
                LOG.warn("GPU {} ({}) is {} at start: advertised Unhealthy", d.index(), d.uuid(), h);
            }
        }
        AllocateResponder responder = new AllocateResponder(config, devices);
        for (AdvertisedResource r : resources) {
            services.add(new ResourceService(r, new PreferredAllocator(r, devices, inventory.topology(),
                    config.objective()), responder, DeviceLists.of(r, this::isAdvertisedHealthy)));
        }
        Files.createDirectories(config.pluginDirectory());
        this.watch = FileSystems.getDefault().newWatchService();
        config.pluginDirectory().register(watch, StandardWatchEventKinds.ENTRY_CREATE,
                StandardWatchEventKinds.ENTRY_DELETE);
        this.registrar = new Thread(this::registrarLoop, "gpusched-k8s-registrar");
        registrar.setDaemon(true);
    }

    /**
     * Starts the plug-in: serves and registers each resource as soon as {@code kubelet.sock} exists.
     *
     * @param inventory the node's GPUs (the caller keeps ownership and closes it after {@link #close()})
     * @param config    settings
     * @return the running plug-in
     * @throws io.gpusched.core.BackendUnavailableException when Unix sockets (epoll) are unavailable here
     * @throws IOException when the device-plugin directory cannot be created or watched
     */
    public static KubeletDevicePlugin start(GpuInventory inventory, DevicePluginConfig config) throws IOException {
        Objects.requireNonNull(inventory, "inventory");
        Objects.requireNonNull(config, "config");
        KubeletDevicePlugin p = new KubeletDevicePlugin(inventory, config);
        p.registrar.start();
        return p;
    }

    /** @return the resources advertised (empty when no device can be) */
    public List<AdvertisedResource> resources() {
        return resources;
    }

    /** @return successful registrations with the kubelet so far (one per resource per kubelet start) */
    public int registrations() {
        return registrations.get();
    }

    private boolean isAdvertisedHealthy(String uuid) {
        return advertised.getOrDefault(uuid, false);
    }

    // synchronized with recover: a late recovery must not advertise Healthy over a newer Unhealthy
    private synchronized void onHealthChange(GpuDevice device, GpuHealth h) {
        GpuHealth before = health.put(device.uuid(), h);
        if (h.equals(before)) {
            return;
        }
        long gen = generation.computeIfAbsent(device.uuid(), k -> new AtomicLong()).incrementAndGet();
        boolean wasAdvertised = isAdvertisedHealthy(device.uuid());
        if (!h.isHealthy()) {
            LOG.warn("GPU {} ({}) health {} -> {}: advertised Unhealthy", device.index(), device.uuid(),
                    before == null ? "unknown" : before, h);
            advertised.put(device.uuid(), false);
            publish();
        } else if (!wasAdvertised && !config.recoveryHold().isZero()) {
            LOG.warn("GPU {} ({}) health {} -> {}: advertised Healthy again if it stays healthy for {}",
                    device.index(), device.uuid(), before == null ? "unknown" : before, h, config.recoveryHold());
            timers.schedule(() -> recover(device, gen), config.recoveryHold().toMillis(), TimeUnit.MILLISECONDS);
        } else {
            LOG.warn("GPU {} ({}) health {} -> {}: advertised Healthy", device.index(), device.uuid(),
                    before == null ? "unknown" : before, h);
            advertised.put(device.uuid(), true);
            publish();
        }
    }

    private synchronized void recover(GpuDevice device, long gen) {
        AtomicLong g = generation.get(device.uuid());
        if (closed || g == null || g.get() != gen || !health.get(device.uuid()).isHealthy()) {
            return;
        }
        LOG.debug("GPU {} ({}) stayed healthy for {}: advertised Healthy", device.index(), device.uuid(),
                config.recoveryHold());
        advertised.put(device.uuid(), true);
        publish();
    }

    private void publish() {
        for (ResourceService s : services) {
            s.publish(DeviceLists.of(s.resource(), this::isAdvertisedHealthy));
        }
    }

    // ---- serving and registration (registrar thread only) ----

    private void registrarLoop() {
        Object registeredWith = null;
        long retryAt = 0;
        while (!closed) {
            try {
                Object kubelet = fileKey(config.kubeletSocketPath());
                boolean ownGone = !servers.isEmpty() && services.stream()
                        .anyMatch(s -> !Files.exists(config.pluginDirectory().resolve(s.resource().socketName()),
                                LinkOption.NOFOLLOW_LINKS));
                boolean due = registeredWith == null && System.nanoTime() - retryAt >= 0;
                if (kubelet != null && !services.isEmpty()
                        && (!kubelet.equals(registeredWith) && (registeredWith != null || due) || ownGone)) {
                    if (registeredWith != null) {
                        LOG.warn("kubelet.sock was re-created or a plug-in socket was removed (kubelet restart):"
                                + " serving and registering again");
                    }
                    stopServers();
                    if (serveAndRegister()) {
                        registeredWith = kubelet;
                    } else {
                        registeredWith = null;
                        retryAt = System.nanoTime() + config.registerRetry().toNanos();
                    }
                }
                watch.poll(200, TimeUnit.MILLISECONDS);
                for (var key = watch.poll(); key != null; key = watch.poll()) {
                    key.pollEvents();
                    key.reset();
                }
            } catch (InterruptedException | ClosedWatchServiceException e) {
                return;
            } catch (RuntimeException e) {
                LOG.warn("device plug-in registrar: {}", e.toString(), e);
                sleep(config.registerRetry());
            }
        }
    }

    private static Object fileKey(Path p) {
        try {
            BasicFileAttributes a = Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            Object k = a.fileKey();
            return k != null ? List.of(k, a.creationTime()) : a.creationTime();
        } catch (IOException e) {
            return null;
        }
    }

    private boolean serveAndRegister() {
        for (ResourceService s : services) {
            Path socket = config.pluginDirectory().resolve(s.resource().socketName());
            try {
                servers.add(sockets.serve(socket, grpcExecutor, s));
            } catch (IOException e) {
                LOG.warn("cannot serve {} on {}: {}", s.resource().name(), socket, e.toString());
                stopServers();
                return false;
            }
        }
        boolean all = true;
        for (ResourceService s : services) {
            all &= register(s.resource());
        }
        if (!all) {
            stopServers();
        }
        return all;
    }

    private boolean register(AdvertisedResource r) {
        ManagedChannel channel = sockets.channel(config.kubeletSocketPath());
        try {
            RegistrationGrpc.newBlockingStub(channel)
                    .withDeadlineAfter(REGISTER_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                    .register(RegisterRequest.newBuilder().setVersion(DevicePluginConfig.API_VERSION)
                            .setEndpoint(r.socketName()).setResourceName(r.name())
                            .setOptions(ResourceService.OPTIONS).build());
            registrations.incrementAndGet();
            LOG.info("registered {} ({} devices) with the kubelet on {}", r.name(), r.devices().size(),
                    r.socketName());
            return true;
        } catch (RuntimeException e) {
            LOG.warn("registering {} with {} failed ({}); trying again in {}", r.name(),
                    config.kubeletSocketPath(), e.getMessage(), config.registerRetry());
            return false;
        } finally {
            UnixSockets.close(channel);
        }
    }

    private void stopServers() {
        for (ResourceService s : services) {
            s.close();
        }
        for (Server server : servers) {
            server.shutdown();
        }
        for (Server server : servers) {
            try {
                if (!server.awaitTermination(2, TimeUnit.SECONDS)) {
                    server.shutdownNow().awaitTermination(2, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                server.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
        servers.clear();
    }

    private static void sleep(Duration d) {
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops serving: ends the streams, shuts the servers down (their sockets go with them), stops the threads. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        inventory.removeHealthListener(listener);
        registrar.interrupt();
        try {
            watch.close();
        } catch (IOException e) {
            LOG.debug("closing the directory watch: {}", e.toString());
        }
        try {
            registrar.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        stopServers();
        for (ResourceService s : services) {
            try {
                Files.deleteIfExists(config.pluginDirectory().resolve(s.resource().socketName()));
            } catch (IOException e) {
                LOG.debug("removing {}: {}", s.resource().socketName(), e.toString());
            }
        }
        timers.shutdownNow();
        grpcExecutor.shutdownNow();
        sockets.close();
        LOG.info("device plug-in stopped");
    }
}
