package io.gpusched.kubernetes;

import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginOptions;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.grpc.ManagedChannel;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The kubelet as the plug-in's tests drive it: {@link KubeletProbe} (the Registration server on
 * {@code <dir>/kubelet.sock}, its checks and its dial-back) with waits that fail the test after 30 s, raw clients and
 * ListAndWatch streams held open. A restart deletes every socket in the directory and serves kubelet.sock again, as a
 * restarting kubelet does.
 */
final class KubeletStandIn implements AutoCloseable {
    /** One accepted registration: the request, and the options the plug-in answered when dialled back. */
    record Registration(RegisterRequest request, DevicePluginOptions options) {
    }

    private final KubeletProbe probe;

    KubeletStandIn(Path dir) throws IOException {
        this.probe = KubeletProbe.start(dir);
    }

    /** Restarts as a kubelet does: every socket in the directory deleted, kubelet.sock served anew. */
    void restart() throws IOException, InterruptedException {
        probe.restart();
    }

    List<Registration> registrations() {
        return probe.rawRegistrations().stream().map(r -> new Registration(r.request(), r.options())).toList();
    }

    /** Waits until n registrations were accepted (fails the test after 30 s). */
    Registration awaitRegistration(int n) throws InterruptedException {
        probe.awaitRegistration(n, Duration.ofSeconds(30)).orElseThrow(
                () -> new AssertionError("expected " + n + " registrations, got " + probe.registrations()));
        return registrations().get(n - 1);
    }

    /** @return a blocking client of the endpoint of the latest registration of a resource */
    DevicePluginGrpc.DevicePluginBlockingStub client(String resource) {
        return probe.client(resource, Duration.ofSeconds(30));
    }

    private ManagedChannel channel(String resource) {
        try {
            return probe.channelOf(resource);
        } catch (IllegalStateException e) {
            throw new AssertionError(e.getMessage(), e);
        }
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
    public void close() {
        probe.close();
    }
}
