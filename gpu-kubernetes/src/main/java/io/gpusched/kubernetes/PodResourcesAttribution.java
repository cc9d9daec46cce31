package io.gpusched.kubernetes;

import io.gpusched.core.Allocation;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.kubernetes.api.podresources.v1.ContainerDevices;
import io.gpusched.kubernetes.api.podresources.v1.ContainerResources;
import io.gpusched.kubernetes.api.podresources.v1.ListPodResourcesRequest;
import io.gpusched.kubernetes.api.podresources.v1.ListPodResourcesResponse;
import io.gpusched.kubernetes.api.podresources.v1.PodResources;
import io.gpusched.kubernetes.api.podresources.v1.PodResourcesListerGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Attributes GPUs to pods on a Kubernetes node, where the kubelet (not gpusched's ledger) owns allocations: reads the
 * kubelet's PodResources API ({@code v1.PodResourcesLister/List}, gRPC on {@code kubelet.sock} in
 * {@value #DEFAULT_DIRECTORY}) and maps each device id it lists to the pod, namespace and container holding it.
 *
 * <p><b>Mount the directory, not the socket.</b> A restarting kubelet removes {@code kubelet.sock} and creates a new
 * one: a container that mounted the socket file keeps the dead one, one that mounted the directory sees the new. This
 * class dials the path anew whenever the socket file changed (another inode) or a call failed, so a kubelet restart
 * is followed at the next refresh.
 *
 * <p><b>Which GPU an id is.</b> A device plug-in advertises ids of its own: NVIDIA's and gpusched's use the GPU's or
 * MIG device's UUID ({@code <uuid>::<n>} under time-slicing), gpusched's falls back to {@code gpu-<index>}, AMD's
 * uses the PCI address. An id names a device when it is its UUID (or the UUID with a {@code ::} suffix), and, for a
 * resource whose name holds {@code gpu}, {@code gpu-<index>} or its PCI address.
 *
 * <p><b>Which process is whose.</b> PodResources names the containers a GPU is assigned to, not their processes. A
 * GPU assigned to exactly one container (listed once or more: two time-sliced replicas of it, a DRA claim's device and
 * CDI names): every process on it is that container's ({@link #ownerOf}); a GPU only containers of one pod share is
 * that pod's (label {@code container}: their names, sorted, comma-separated). A GPU containers of several pods share
 * (time-slicing): PodResources cannot tell their processes apart, so none is attributed (a guess would bill one pod
 * for another's work); {@link #holdersOf} still lists them.
 *
 * <p>The list is read at most once per {@code refresh} (10 s by default), with a 2-s deadline; when the kubelet cannot
 * be reached, the last list is used for at most {@code refresh} x 6, then nothing is attributed until it answers. The
 * directory and socket are checked before each dial: the directory must not be writable by other users than its
 * owner (root or this process's user), and the socket must be a socket owned by one of them; anything else could
 * forge which pod holds which GPU.
 */
public final class PodResourcesAttribution implements ProcessAttribution, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PodResourcesAttribution.class);

    /** Where the kubelet serves the PodResources API. */
    public static final String DEFAULT_DIRECTORY = "/var/lib/kubelet/pod-resources";
    /** The socket's file name in that directory. */
    public static final String SOCKET = "kubelet.sock";
    /** Largest List answer read (the kubelet's own limit is 16 MiB). */
    public static final int MAX_MESSAGE_BYTES = 16 << 20;

    /**
     * One container a device is assigned to.
     *
     * @param namespace the pod's namespace
     * @param pod       the pod's name
     * @param container the container's name
     * @param resource  the resource the device was assigned as ({@code nvidia.com/gpu}), or {@code dra:<claim>}
     * @param deviceId  the id the kubelet lists
     */
    public record PodContainer(String namespace, String pod, String container, String resource, String deviceId) {
        /** @return the usage owner: {@code <namespace>/<pod>}, labels namespace, pod, container, resource */
        public UsageOwner owner() {
            Map<String, String> labels = new LinkedHashMap<>();
            labels.put("namespace", namespace);
            labels.put("pod", pod);
            labels.put("container", container);
            labels.put("resource", resource);
            return new UsageOwner(UsageOwner.Kind.POD, namespace + "/" + pod, labels);
        }
    }

    private final Path directory;
    private final Duration refresh;
    private final Clock clock;
    private final UnixSockets sockets;
    private ManagedChannel channel;
    private Object socketKey;
    private List<PodContainer> assignments = List.of();
    private Instant fetchedAt;
    private Instant triedAt;
    private String lastError;
    private boolean closed;

    private PodResourcesAttribution(Path directory, Duration refresh, Clock clock) {
        this.directory = Objects.requireNonNull(directory, "directory");
        this.refresh = Objects.requireNonNull(refresh, "refresh");
        this.clock = Objects.requireNonNull(clock, "clock");
        if (refresh.isNegative() || refresh.isZero()) {
            throw new IllegalArgumentException("refresh must be positive, was " + refresh);
        }
        this.sockets = new UnixSockets("pod-resources");
    }

    /**
     * @param directory the kubelet's pod-resources directory ({@value #DEFAULT_DIRECTORY}, or where it is mounted)
     * @param refresh   how often the list is read again
     * @param clock     the clock refreshes are timed by
     * @return the source (nothing is dialled until it is asked)
     * @throws BackendUnavailableException when gRPC over Unix sockets is unavailable here
     */
    public static PodResourcesAttribution open(Path directory, Duration refresh, Clock clock) {
        return new PodResourcesAttribution(directory, refresh, clock);
    }

    /** @return the source over {@value #DEFAULT_DIRECTORY}, read every 10 s */
    public static PodResourcesAttribution host() {
        return open(Path.of(DEFAULT_DIRECTORY), Duration.ofSeconds(10), Clock.systemUTC());
    }

    /** @return true: it names {@link UsageOwner.Kind#POD}s */
    @Override
    public boolean namesOthers() {
        return true;
    }

    @Override
    public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
        List<PodContainer> h = holdersOf(device);
        if (h.isEmpty()) {
            return Optional.empty();
        }
        // one container may list a GPU more than once (two time-sliced replicas of it, a DRA claim's device and CDI
        // names): it is still the only holder (review54); several containers of one pod (a claim they share, replicas
        // handed to each) make the pod the only holder, whichever container runs the process (review65)
        PodContainer first = h.get(0);
        TreeSet<String> containers = new TreeSet<>();
        TreeSet<String> resources = new TreeSet<>();
        for (PodContainer c : h) {
            if (!c.namespace().equals(first.namespace()) || !c.pod().equals(first.pod())) {
                return Optional.empty();
            }
            containers.add(c.container());
            resources.add(c.resource());
        }
        // the containers and resources it holds the GPU as, sorted: the kubelet lists them in no fixed order (review56)
        return Optional.of(new PodContainer(first.namespace(), first.pod(), String.join(",", containers),
                String.join(",", resources), first.deviceId()).owner());
    }

    /**
     * @param device a device of this node
     * @return the containers the kubelet assigned it to (several under time-slicing), as of the latest list
     */
    public List<PodContainer> holdersOf(GpuDevice device) {
        List<PodContainer> out = new ArrayList<>();
        for (PodContainer c : current()) {
            if (names(c.resource(), c.deviceId(), device)) {
                out.add(c);
            }
        }
        return out;
    }

    /** @return every device assignment of the latest list (refreshed when due) */
    public List<PodContainer> assignments() {
        return current();
    }

    /** @return why the latest read failed, if it did */
    public synchronized Optional<String> lastError() {
        return Optional.ofNullable(lastError);
    }

    /**
     * Reads the list now, whatever the refresh interval.
     *
     * @return true when the kubelet answered
     */
    public synchronized boolean refreshNow() {
        if (closed) {
            throw new IllegalStateException("closed");
        }
        Instant now = clock.instant();
        triedAt = now;
        for (int attempt = 0;; attempt++) {
            boolean reused = channel != null;
            try {
                ManagedChannel ch = channel();
                ListPodResourcesResponse r = PodResourcesListerGrpc.newBlockingStub(ch)
                        .withDeadlineAfter(2, TimeUnit.SECONDS).withMaxInboundMessageSize(MAX_MESSAGE_BYTES)
                        .list(ListPodResourcesRequest.getDefaultInstance());
                assignments = flatten(r);
                fetchedAt = now;
                lastError = null;
                return true;
            } catch (StatusRuntimeException | IOException | IllegalStateException e) {
                dropChannel(); // dial anew: the kubelet may have restarted on a new socket
                if (reused && attempt == 0 && e instanceof StatusRuntimeException) {
                    // a channel to a kubelet that restarted, on a socket that got the old one's inode (the file
                    // system reused it, so the identity check saw no change): one more try on a fresh dial
                    continue;
                }
                String why = String.valueOf(e.getMessage());
                if (!why.equals(lastError)) {
                    LOG.warn("kubelet PodResources at {} did not answer: {}", directory.resolve(SOCKET), why);
                }
                lastError = why;
                return false;
            }
        }
    }

    private synchronized List<PodContainer> current() {
        if (closed) {
            return List.of();
        }
        Instant now = clock.instant();
        if (triedAt == null || !now.isBefore(triedAt.plus(refresh))) {
            refreshNow();
        }
        if (fetchedAt == null || now.isAfter(fetchedAt.plus(refresh.multipliedBy(6)))) {
            return List.of(); // too old to trust: pods come and go
        }
        return assignments;
    }

    private static List<PodContainer> flatten(ListPodResourcesResponse r) {
        List<PodContainer> out = new ArrayList<>();
        for (PodResources p : r.getPodResourcesList()) {
            for (ContainerResources c : p.getContainersList()) {
                for (ContainerDevices d : c.getDevicesList()) {
                    for (String id : d.getDeviceIdsList()) {
                        out.add(new PodContainer(p.getNamespace(), p.getName(), c.getName(), d.getResourceName(), id));
                    }
                }
                c.getDynamicResourcesList().forEach(dr -> dr.getClaimResourcesList().forEach(cr -> {
                    String resource = "dra:" + dr.getClaimNamespace() + "/" + dr.getClaimName();
                    out.add(new PodContainer(p.getNamespace(), p.getName(), c.getName(), resource,
                            cr.getDeviceName()));
                    cr.getCdiDevicesList().forEach(cdi -> out.add(new PodContainer(p.getNamespace(), p.getName(),
                            c.getName(), resource, cdi.getName())));
                }));
            }
        }
        return List.copyOf(out);
    }

    /** @return whether the kubelet's device id {@code id} of {@code resource} names {@code d} */
    static boolean names(String resource, String id, GpuDevice d) {
        if (id.isEmpty()) {
            return false;
        }
        String bare = id;
        int eq = bare.lastIndexOf('=');
        if (resource.startsWith("dra:") && eq >= 0) {
            bare = bare.substring(eq + 1); // a CDI name: vendor/class=device
        }
        int sep = bare.indexOf("::");
        String head = sep >= 0 ? bare.substring(0, sep) : bare;
        if (head.equals(d.uuid())) {
            return true;
        }
        if (!resource.toLowerCase(Locale.ROOT).contains("gpu")) {
            return false;
        }
        if (head.equals("gpu-" + d.index())) {
            return true;
        }
        return pciKey(head).map(k -> pciKey(d.pciBusId()).map(k::equals).orElse(false)).orElse(false);
    }

    /** @return a PCI address as domain:bus:device.function with a 4-digit domain, lower case; empty if not one */
    static Optional<String> pciKey(String s) {
        String[] parts = s.toLowerCase(Locale.ROOT).split(":");
        if (parts.length != 3 || !parts[0].matches("[0-9a-f]{4,8}") || !parts[1].matches("[0-9a-f]{2}")
                || !parts[2].matches("[0-9a-f]{2}\\.[0-7]")) {
            return Optional.empty();
        }
        long domain = Long.parseLong(parts[0], 16);
        if (domain > 0xFFFF) {
            return Optional.empty();
        }
        return Optional.of(String.format(Locale.ROOT, "%04x:%s:%s", domain, parts[1], parts[2]));
    }

    private ManagedChannel channel() throws IOException {
        Path socket = directory.resolve(SOCKET);
        Object key = checkSocket(socket);
        if (channel != null && !key.equals(socketKey)) {
            LOG.info("{} was created anew (kubelet restart): dialling it again", socket);
            dropChannel();
        }
        if (channel == null) {
            channel = sockets.channel(socket);
            socketKey = key;
        }
        return channel;
    }

    /**
     * @return the socket's identity (its inode and change time)
     * @throws IOException when it is absent or not trustworthy
     */
    private Object checkSocket(Path socket) throws IOException {
        int me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        PosixFileAttributes dir = Files.readAttributes(directory, PosixFileAttributes.class);
        int dirOwner = (Integer) Files.getAttribute(directory, "unix:uid");
        if (!dir.isDirectory() || (dirOwner != 0 && dirOwner != me)
                || dir.permissions().contains(PosixFilePermission.GROUP_WRITE)
                || dir.permissions().contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new IOException(directory + " is not a directory only root or this user (uid " + me + ") may"
                    + " write (owner uid " + dirOwner + ", mode " + PosixFilePermissions.toString(dir.permissions())
                    + "): another user could forge which pod holds which GPU");
        }
        PosixFileAttributes s = Files.readAttributes(socket, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        int owner = (Integer) Files.getAttribute(socket, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (!s.isOther() || (owner != 0 && owner != me)) {
            throw new IOException(socket + " is not a socket owned by root or this user (uid " + me + ")");
        }
        // the inode alone is not enough: ext4 gives a socket made right after the old one's removal the same inode
        return List.of(String.valueOf(s.fileKey()),
                Files.getAttribute(socket, "unix:ctime", LinkOption.NOFOLLOW_LINKS));
    }

    private void dropChannel() {
        if (channel != null) {
            UnixSockets.close(channel);
            channel = null;
            socketKey = null;
        }
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            dropChannel();
            sockets.close();
        }
    }
}
