package io.gpusched.kubernetes;

import io.gpusched.kubernetes.api.podresources.v1.ContainerDevices;
import io.gpusched.kubernetes.api.podresources.v1.ContainerResources;
import io.gpusched.kubernetes.api.podresources.v1.ListPodResourcesRequest;
import io.gpusched.kubernetes.api.podresources.v1.ListPodResourcesResponse;
import io.gpusched.kubernetes.api.podresources.v1.PodResources;
import io.gpusched.kubernetes.api.podresources.v1.PodResourcesListerGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The kubelet's side of the PodResources API, written here from the same proto: {@code v1.PodResourcesLister/List} on
 * {@code <dir>/kubelet.sock}, answering the pods the test set. A restart does what a restarting kubelet does to this
 * socket: the server stops (the socket file is removed) and a new one serves a new socket file at the same path.
 */
public final class PodResourcesStandIn implements AutoCloseable {
    private final Path dir;
    private final UnixSockets sockets = new UnixSockets("pod-resources-stand-in");
    private final ExecutorService executor = Executors.newCachedThreadPool(UnixSockets.daemon("pod-resources"));
    private volatile ListPodResourcesResponse pods = ListPodResourcesResponse.getDefaultInstance();
    private volatile boolean failing;
    /** List calls answered. */
    public final AtomicInteger lists = new AtomicInteger();
    private Server server;

    /** Serves {@code <dir>/kubelet.sock}. */
    public PodResourcesStandIn(Path dir) throws IOException {
        this.dir = dir;
        start();
    }

    private void start() throws IOException {
        server = sockets.serve(dir.resolve("kubelet.sock"), executor,
                new PodResourcesListerGrpc.PodResourcesListerImplBase() {
                    @Override
                    public void list(ListPodResourcesRequest r, StreamObserver<ListPodResourcesResponse> out) {
                        lists.incrementAndGet();
                        if (failing) {
                            out.onError(Status.INTERNAL.withDescription("stand-in told to fail").asRuntimeException());
                            return;
                        }
                        out.onNext(pods);
                        out.onCompleted();
                    }
                });
    }

    /** The pods List answers from now on. */
    public void set(PodResources... p) {
        pods = ListPodResourcesResponse.newBuilder().addAllPodResources(List.of(p)).build();
    }

    /** Whether List answers an error. */
    public void failing(boolean f) {
        failing = f;
    }

    /** Stops serving: the socket file is gone (a kubelet that is down). */
    public void stop() throws InterruptedException {
        server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }

    /** Restarts as a kubelet does: the socket is removed and served anew at the same path (another inode). */
    public void restart() throws IOException, InterruptedException {
        stop();
        Files.deleteIfExists(dir.resolve("kubelet.sock"));
        start();
    }

    /** @return a pod with one container holding devices of one resource */
    public static PodResources pod(String namespace, String name, String container, String resource, String... ids) {
        return PodResources.newBuilder().setNamespace(namespace).setName(name).addContainers(ContainerResources
                .newBuilder().setName(container).addDevices(ContainerDevices.newBuilder().setResourceName(resource)
                        .addAllDeviceIds(List.of(ids))))
                .build();
    }

    @Override
    public void close() throws InterruptedException {
        stop();
        executor.shutdownNow();
        sockets.close();
    }
}
