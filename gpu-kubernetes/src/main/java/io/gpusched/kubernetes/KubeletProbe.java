package io.gpusched.kubernetes;

import io.gpusched.kubernetes.api.v1beta1.AllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.AllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.Device;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginOptions;
import io.gpusched.kubernetes.api.v1beta1.DeviceSpec;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The kubelet's side of the device plug-in API (v1beta1), in process: a Registration server on
 * {@code <dir>/kubelet.sock} that records each plug-in's Register call and, as the kubelet does, refuses a version
 * other than v1beta1 or an endpoint that is not a file name, and before answering dials the plug-in's endpoint back
 * and calls GetDevicePluginOptions. Then, as a client of a registered plug-in, it reads the first ListAndWatch answer
 * and calls Allocate. {@code gpusched selftest} checks the device plug-in with it; the plug-in's tests drive it too.
 * Every wait is bounded by the caller's timeout.
 */
public final class KubeletProbe implements AutoCloseable {
    /**
     * One accepted registration.
     *
     * @param version      the API version the plug-in asked for
     * @param resourceName the resource it registered
     * @param endpoint     its socket's file name in the directory
     */
    public record Registration(String version, String resourceName, String endpoint) {
    }

    /**
     * One container's Allocate answer.
     *
     * @param devicePaths the device specs' host paths, in order
     * @param envs        the environment variables it sets
     */
    public record AllocateAnswer(List<String> devicePaths, Map<String, String> envs) {
        /** Copies both. */
        public AllocateAnswer {
            devicePaths = List.copyOf(devicePaths);
            envs = Map.copyOf(envs);
        }
    }

    /** A registration as received: the request, and the options the plug-in answered when dialled back. */
    record Raw(RegisterRequest request, DevicePluginOptions options) {
    }

    private final Path dir;
    private final UnixSockets sockets = new UnixSockets("kubelet-probe");
    private final ExecutorService executor = Executors.newCachedThreadPool(UnixSockets.daemon("kubelet-probe"));
    private final List<Raw> registrations = new CopyOnWriteArrayList<>();
    private final List<ManagedChannel> channels = new CopyOnWriteArrayList<>();
    private Server server;

    private KubeletProbe(Path dir) {
        this.dir = dir;
    }

    /** @return whether gRPC over Unix domain sockets (epoll) works here: the probe and the plug-in need it */
    public static boolean available() {
        return UnixSockets.available();
    }

    /** @return why the probe cannot run here, when {@link #available()} is false */
    public static String unavailabilityCause() {
        return String.valueOf(UnixSockets.unavailabilityCause());
    }

    /**
     * Serves the Registration service on {@code dir/kubelet.sock}.
     *
     * @param dir the device-plug-in directory (an existing directory; the plug-in's sockets go there too)
     * @return the running probe
     * @throws io.gpusched.core.BackendUnavailableException when Unix sockets (epoll) are unavailable here
     * @throws IOException when the socket cannot be served
     */
    public static KubeletProbe start(Path dir) throws IOException {
        Objects.requireNonNull(dir, "dir");
        KubeletProbe p = new KubeletProbe(dir);
        try {
            p.serve();
        } catch (IOException | RuntimeException e) {
            p.close();
            throw e;
        }
        return p;
    }

    /** @return the socket the kubelet's Registration service is served on */
    public Path socket() {
        return dir.resolve(DevicePluginConfig.KUBELET_SOCKET);
    }

    private void serve() throws IOException {
        server = sockets.serve(socket(), executor, new RegistrationGrpc.RegistrationImplBase() {
            @Override
            public void register(RegisterRequest r, StreamObserver<Empty> out) {
                if (!DevicePluginConfig.API_VERSION.equals(r.getVersion())) {
                    out.onError(Status.INVALID_ARGUMENT.withDescription("unsupported version " + r.getVersion())
                            .asRuntimeException());
                    return;
                }
                if (r.getEndpoint().isEmpty() || r.getEndpoint().contains("/")) {
                    out.onError(Status.INVALID_ARGUMENT.withDescription("endpoint must be a file name")
                            .asRuntimeException());
                    return;
                }
                DevicePluginOptions options;
                try {
                    options = DevicePluginGrpc.newBlockingStub(channel(r.getEndpoint()))
                            .withDeadlineAfter(5, TimeUnit.SECONDS).getDevicePluginOptions(Empty.getDefaultInstance());
                } catch (RuntimeException e) {
                    out.onError(Status.UNAVAILABLE.withDescription("could not dial the plug-in back: " + e)
                            .asRuntimeException());
                    return;
                }
                registrations.add(new Raw(r, options));
                out.onNext(Empty.getDefaultInstance());
                out.onCompleted();
            }
        });
    }

    /** Restarts as a kubelet does: every socket in the directory deleted, kubelet.sock served anew. */
    void restart() throws IOException, InterruptedException {
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.toList()) {
                if (p.getFileName().toString().endsWith(".sock")) {
                    Files.deleteIfExists(p);
                }
            }
        }
        serve();
    }

    /** @return the registrations accepted so far, in order */
    public List<Registration> registrations() {
        return registrations.stream().map(KubeletProbe::of).toList();
    }

    /** @return the registrations accepted so far as received */
    List<Raw> rawRegistrations() {
        return List.copyOf(registrations);
    }

    private static Registration of(Raw r) {
        return new Registration(r.request().getVersion(), r.request().getResourceName(), r.request().getEndpoint());
    }

    /**
     * @param n       how many registrations to wait for
     * @param timeout how long at most
     * @return the n-th accepted registration, or empty when fewer arrived within the timeout
     * @throws InterruptedException when interrupted while waiting
     */
    public Optional<Registration> awaitRegistration(int n, Duration timeout) throws InterruptedException {
        long until = System.nanoTime() + timeout.toNanos();
        while (registrations.size() < n) {
            if (System.nanoTime() - until > 0) {
                return Optional.empty();
            }
            Thread.sleep(20);
        }
        return Optional.of(of(registrations.get(n - 1)));
    }

    /**
     * Reads the first list a registered resource's ListAndWatch stream sends, then cancels the stream.
     *
     * @param resource a registered resource name
     * @param timeout  how long at most
     * @return each listed device's id and health ({@code Healthy}, {@code Unhealthy}), in the plug-in's order
     * @throws io.grpc.StatusRuntimeException when the stream fails or sends nothing within the timeout
     *                                        ({@code DEADLINE_EXCEEDED})
     * @throws IllegalStateException          when no plug-in registered the resource
     */
    public Map<String, String> firstList(String resource, Duration timeout) {
        Context.CancellableContext ctx = Context.current().withCancellation();
        try {
            return ctx.call(() -> {
                Iterator<ListAndWatchResponse> it = client(resource, timeout)
                        .listAndWatch(Empty.getDefaultInstance());
                if (!it.hasNext()) {
                    throw Status.UNAVAILABLE.withDescription("ListAndWatch of " + resource + " ended without a list")
                            .asRuntimeException();
                }
                Map<String, String> out = new LinkedHashMap<>();
                for (Device d : it.next().getDevicesList()) {
                    out.put(d.getID(), d.getHealth());
                }
                return out;
            });
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(e);
        } finally {
            ctx.cancel(null);
        }
    }

    /**
     * Calls Allocate on a registered resource for one container asking for {@code ids}.
     *
     * @return the plug-in's answer for the container
     * @throws io.grpc.StatusRuntimeException when the plug-in refuses or does not answer within the timeout
     * @throws IllegalStateException          when no plug-in registered the resource
     */
    public AllocateAnswer allocate(String resource, List<String> ids, Duration timeout) {
        AllocateResponse r = client(resource, timeout).allocate(AllocateRequest.newBuilder()
                .addContainerRequests(ContainerAllocateRequest.newBuilder().addAllDevicesIds(ids)).build());
        if (r.getContainerResponsesCount() != 1) {
            throw Status.INTERNAL.withDescription("Allocate for one container answered "
                    + r.getContainerResponsesCount()).asRuntimeException();
        }
        ContainerAllocateResponse c = r.getContainerResponses(0);
        return new AllocateAnswer(c.getDevicesList().stream().map(DeviceSpec::getHostPath).toList(),
                c.getEnvsMap());
    }

    /** @return a blocking client of the endpoint of the latest registration of a resource */
    DevicePluginGrpc.DevicePluginBlockingStub client(String resource, Duration timeout) {
        return DevicePluginGrpc.newBlockingStub(channelOf(resource)).withDeadlineAfter(timeout.toMillis(),
                TimeUnit.MILLISECONDS);
    }

    /** @return a new channel to the endpoint of the latest registration of a resource */
    ManagedChannel channelOf(String resource) {
        Raw r = null;
        for (Raw x : registrations) {
            if (x.request().getResourceName().equals(resource)) {
                r = x;
            }
        }
        if (r == null) {
            throw new IllegalStateException("no registration of " + resource + " among " + registrations);
        }
        return channel(r.request().getEndpoint());
    }

    private ManagedChannel channel(String endpoint) {
        ManagedChannel ch = sockets.channel(dir.resolve(endpoint));
        channels.add(ch);
        return ch;
    }

    /** Stops serving and closes every channel; the socket file goes with the server. */
    @Override
    public void close() {
        for (ManagedChannel c : channels) {
            UnixSockets.close(c);
        }
        if (server != null) {
            server.shutdownNow();
            try {
                server.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        executor.shutdownNow();
        sockets.close();
    }
}
