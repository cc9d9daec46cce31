package io.gpusched.kubernetes;

import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginOptions;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The kubelet's side of the device plugin API, written here from the same proto: a Registration server on
 * {@code <dir>/kubelet.sock} that, as the kubelet does, refuses a version other than v1beta1 or an endpoint that is
 * not a file name, and before answering Register dials the plug-in's endpoint back and calls GetDevicePluginOptions
 * (a plug-in that registers from a thread its server needs, or before serving, deadlocks or fails here). A restart
 * deletes every socket in the directory and serves kubelet.sock again, as a restarting kubelet does.
 */
final class KubeletStandIn implements AutoCloseable {
    /** One accepted registration: the request, and the options the plug-in answered when dialled back. */
    record Registration(RegisterRequest request, DevicePluginOptions options) {
    }

    private final Path dir;
    private final UnixSockets sockets = new UnixSockets("kubelet-stand-in");
    private final ExecutorService executor = Executors.newCachedThreadPool(UnixSockets.daemon("kubelet-stand-in"));
    private final List<Registration> registrations = new CopyOnWriteArrayList<>();
    private final List<ManagedChannel> channels = new CopyOnWriteArrayList<>();
    private Server server;

    KubeletStandIn(Path dir) throws IOException {
        this.dir = dir;
        start();
    }

    private void start() throws IOException {
        server = sockets.serve(dir.resolve("kubelet.sock"), executor, new RegistrationGrpc.RegistrationImplBase() {
            @Override
            public void register(RegisterRequest r, StreamObserver<Empty> out) {
                if (!"v1beta1".equals(r.getVersion())) {
                    out.onError(Status.INVALID_ARGUMENT.withDescription("unsupported version " + r.getVersion())
                            .asRuntimeException());
                    return;
                }
                if (r.getEndpoint().isEmpty() || r.getEndpoint().contains("/")) {
                    out.onError(Status.INVALID_ARGUMENT.withDescription("endpoint must be a file name")
                            .asRuntimeException());
                    return;
                }
                ManagedChannel ch = sockets.channel(dir.resolve(r.getEndpoint()));
                channels.add(ch);
                DevicePluginOptions options;
                try {
                    options = DevicePluginGrpc.newBlockingStub(ch).withDeadlineAfter(5, TimeUnit.SECONDS)
                            .getDevicePluginOptions(Empty.getDefaultInstance());
                } catch (RuntimeException e) {
                    out.onError(Status.UNAVAILABLE.withDescription("could not dial the plug-in back: " + e)
                            .asRuntimeException());
                    return;
                }
                registrations.add(new Registration(r, options));
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
        start();
    }

    List<Registration> registrations() {
        return List.copyOf(registrations);
    }

    /** Waits until n registrations were accepted (fails the test after 30 s). */
    Registration awaitRegistration(int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (registrations.size() < n) {
            if (System.nanoTime() > until) {
                throw new AssertionError("expected " + n + " registrations, got " + registrations);
            }
            Thread.sleep(20);
        }
        return registrations.get(n - 1);
    }

    /** @return a blocking client of the endpoint of the latest registration of a resource */
    DevicePluginGrpc.DevicePluginBlockingStub client(String resource) {
        return DevicePluginGrpc.newBlockingStub(channel(resource)).withDeadlineAfter(30, TimeUnit.SECONDS);
    }

    private ManagedChannel channel(String resource) {
        Registration r = null;
        for (Registration x : registrations) {
            if (x.request().getResourceName().equals(resource)) {
                r = x;
            }
        }
        if (r == null) {
            throw new AssertionError("no registration of " + resource + " among " + registrations);
        }
        ManagedChannel ch = sockets.channel(dir.resolve(r.request().getEndpoint()));
        channels.add(ch);
        return ch;
    }

    /** Opens ListAndWatch on a resource's endpoint; every list arrives in the queue. */
    Watch watch(String resource) {
        Watch w = new Watch();
        DevicePluginGrpc.newStub(channel(resource)).listAndWatch(Empty.getDefaultInstance(), w);
        return w;
    }

    /** A ListAndWatch stream as the kubelet holds it. */
    static final class Watch implements StreamObserver<ListAndWatchResponse> {
        final BlockingQueue<ListAndWatchResponse> lists = new LinkedBlockingQueue<>();
        volatile boolean completed;
        volatile Throwable error;

        @Override
        public void onNext(ListAndWatchResponse v) {
            lists.add(v);
        }

        @Override
        public void onError(Throwable t) {
            error = t;
        }

        @Override
        public void onCompleted() {
            completed = true;
        }

        /** @return the next list (fails after 30 s) */
        ListAndWatchResponse next() throws InterruptedException {
            ListAndWatchResponse r = lists.poll(30, TimeUnit.SECONDS);
            if (r == null) {
                throw new AssertionError("no ListAndWatch update (completed " + completed + ", error " + error + ")");
            }
            return r;
        }

        List<ListAndWatchResponse> drained() {
            List<ListAndWatchResponse> out = new ArrayList<>();
            lists.drainTo(out);
            return out;
        }
    }

    @Override
    public void close() throws InterruptedException {
        for (ManagedChannel c : channels) {
            UnixSockets.close(c);
        }
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        executor.shutdownNow();
        sockets.close();
    }
}
