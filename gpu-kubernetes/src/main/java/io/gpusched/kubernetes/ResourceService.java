package io.gpusched.kubernetes;

import io.gpusched.core.GpuDevice;
import io.gpusched.kubernetes.api.v1beta1.AllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.AllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationResponse;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginOptions;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.PreStartContainerRequest;
import io.gpusched.kubernetes.api.v1beta1.PreStartContainerResponse;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationResponse;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code DevicePlugin} service of one resource. ListAndWatch sends the current list at once and a new full list on
 * every change (never an unchanged one); its stream is never completed while the plug-in serves (that would
 * disconnect every device), only at {@link #close()}. Bad requests are answered {@code INVALID_ARGUMENT}, an id that is
 * not healthy at Allocate {@code FAILED_PRECONDITION} (the kubelet then has the list that says so).
 */
final class ResourceService extends DevicePluginGrpc.DevicePluginImplBase {
    private static final Logger LOG = LoggerFactory.getLogger(ResourceService.class);

    /** The options given at Register and from GetDevicePluginOptions (the kubelet takes them from the latter). */
    static final DevicePluginOptions OPTIONS = DevicePluginOptions.newBuilder()
            .setPreStartRequired(false).setGetPreferredAllocationAvailable(true).build();

    private final AdvertisedResource resource;
    private final PreferredAllocator allocator;
    private final AllocateResponder responder;
    private final Map<String, AdvertisedResource.Entry> byId = new HashMap<>();
    private final List<ServerCallStreamObserver<ListAndWatchResponse>> watchers = new CopyOnWriteArrayList<>();
    private volatile ListAndWatchResponse current;

    ResourceService(AdvertisedResource resource, PreferredAllocator allocator, AllocateResponder responder,
            ListAndWatchResponse initial) {
        this.resource = resource;
        this.allocator = allocator;
        this.responder = responder;
        this.current = initial;
        for (AdvertisedResource.Entry e : resource.devices()) {
            byId.put(e.id(), e);
        }
    }

    AdvertisedResource resource() {
        return resource;
    }

    /** Publishes a new list to every watcher, if it differs from the last one. */
    synchronized void publish(ListAndWatchResponse list) {
        if (list.equals(current)) {
            return;
        }
        current = list;
        for (ServerCallStreamObserver<ListAndWatchResponse> w : watchers) {
            send(w, list);
        }
    }

    private void send(ServerCallStreamObserver<ListAndWatchResponse> w, ListAndWatchResponse list) {
        synchronized (w) {
            if (w.isCancelled()) {
                watchers.remove(w);
                return;
            }
            try {
                w.onNext(list);
            } catch (RuntimeException e) {
                LOG.debug("ListAndWatch stream of {} gone: {}", resource.name(), e.toString());
                watchers.remove(w);
            }
        }
    }

    @Override
    public void getDevicePluginOptions(Empty request, StreamObserver<DevicePluginOptions> out) {
        out.onNext(OPTIONS);
        out.onCompleted();
    }

    @Override
    public void listAndWatch(Empty request, StreamObserver<ListAndWatchResponse> out) {
        ServerCallStreamObserver<ListAndWatchResponse> w = (ServerCallStreamObserver<ListAndWatchResponse>) out;
        w.setOnCancelHandler(() -> watchers.remove(w));
        synchronized (this) {
            watchers.add(w);
            send(w, current);
        }
    }

    @Override
    public void getPreferredAllocation(PreferredAllocationRequest request,
            StreamObserver<PreferredAllocationResponse> out) {
        PreferredAllocationResponse.Builder b = PreferredAllocationResponse.newBuilder();
        try {
            for (int i = 0; i < request.getContainerRequestsCount(); i++) {
                ContainerPreferredAllocationRequest r = request.getContainerRequests(i);
                List<String> ids = allocator.prefer(r.getAvailableDeviceIDsList(), r.getMustIncludeDeviceIDsList(),
                        r.getAllocationSize());
                b.addContainerResponses(ContainerPreferredAllocationResponse.newBuilder().addAllDeviceIDs(ids));
            }
        } catch (InvalidDeviceRequestException e) {
            out.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        } catch (RuntimeException e) {
            LOG.warn("GetPreferredAllocation for {} failed", resource.name(), e);
            out.onError(Status.INTERNAL.withDescription(e.toString()).asRuntimeException());
            return;
        }
        out.onNext(b.build());
        out.onCompleted();
    }

    @Override
    public void allocate(AllocateRequest request, StreamObserver<AllocateResponse> out) {
        AllocateResponse.Builder b = AllocateResponse.newBuilder();
        ListAndWatchResponse list = current;
        Set<String> healthy = new HashSet<>();
        list.getDevicesList().forEach(d -> {
            if (DeviceLists.HEALTHY.equals(d.getHealth())) {
                healthy.add(d.getID());
            }
        });
        try {
            for (int i = 0; i < request.getContainerRequestsCount(); i++) {
                ContainerAllocateRequest r = request.getContainerRequests(i);
                List<String> ids = r.getDevicesIdsList();
                if (ids.isEmpty()) {
                    throw new InvalidDeviceRequestException("container request " + i + " of Allocate names no device"
                            + " of " + resource.name());
                }
                TreeMap<Integer, GpuDevice> gpus = new TreeMap<>();
                Set<String> seen = new HashSet<>();
                List<String> sick = new ArrayList<>();
                for (String id : ids) {
                    AdvertisedResource.Entry e = byId.get(id);
                    if (e == null) {
                        throw new InvalidDeviceRequestException("Allocate names device "
                                + InvalidDeviceRequestException.quote(id) + ", which is not a"
                                + " device of " + resource.name() + " (" + byId.size() + " devices)");
                    }
                    if (!seen.add(id)) {
                        throw new InvalidDeviceRequestException("Allocate names device "
                                + InvalidDeviceRequestException.quote(id) + " twice");
                    }
                    if (!healthy.contains(id)) {
                        sick.add(id);
                    }
                    gpus.put(e.device().index(), e.device());
                }
                if (!sick.isEmpty()) {
                    out.onError(Status.FAILED_PRECONDITION.withDescription("devices " + sick + " of "
                            + resource.name() + " are Unhealthy; ListAndWatch has said so").asRuntimeException());
                    return;
                }
                b.addContainerResponses(responder.respond(ids, new ArrayList<>(gpus.values())));
            }
        } catch (InvalidDeviceRequestException e) {
            out.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        } catch (RuntimeException e) {
            LOG.warn("Allocate for {} failed", resource.name(), e);
            out.onError(Status.FAILED_PRECONDITION.withDescription(e.getMessage() != null ? e.getMessage()
                    : e.toString()).asRuntimeException());
            return;
        }
        out.onNext(b.build());
        out.onCompleted();
    }

    @Override
    public void preStartContainer(PreStartContainerRequest request, StreamObserver<PreStartContainerResponse> out) {
        out.onNext(PreStartContainerResponse.getDefaultInstance());
        out.onCompleted();
    }

    /** Ends every ListAndWatch stream: only when the plug-in stops serving this resource. */
    void close() {
        for (ServerCallStreamObserver<ListAndWatchResponse> w : watchers) {
            synchronized (w) {
                try {
                    w.onCompleted();
                } catch (RuntimeException e) {
                    LOG.debug("closing a ListAndWatch stream: {}", e.toString());
                }
            }
        }
        watchers.clear();
    }
}
