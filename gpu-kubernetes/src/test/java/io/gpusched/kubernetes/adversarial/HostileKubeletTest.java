package io.gpusched.kubernetes.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.kubernetes.DevicePluginConfig;
import io.gpusched.kubernetes.KubeletDevicePlugin;
import io.gpusched.kubernetes.api.v1beta1.AllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.AllocateResponse;
import io.gpusched.kubernetes.api.v1beta1.ContainerAllocateRequest;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.Device;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginOptions;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.ListAndWatchResponse;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationResponse;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.stub.StreamObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial review of issue 27: a kubelet stand-in written here from the v1beta1 proto (not the module's own
 * stand-in), attacking the plug-in as a kubelet and as a hostile client would. Scores are recomputed here from the
 * topology's raw link counts and PCIe levels; the optimum is an exhaustive search written here.
 */
@Tag("adversarial")
class HostileKubeletTest {

    static final Duration WAIT = Duration.ofSeconds(20);

    @TempDir
    Path tmp;
    Path dir;

    @BeforeEach
    void epoll() throws Exception {
        assumeTrue(Epoll.isAvailable(),
                "Unix domain sockets need Netty's epoll transport: " + Epoll.unavailabilityCause());
        dir = Files.createDirectories(tmp.resolve("device-plugins"));
    }

    DevicePluginConfig.Builder config() {
        return DevicePluginConfig.builder().pluginDirectory(dir).recoveryHold(Duration.ZERO)
                .registerRetry(Duration.ofMillis(100)).devRoot(tmp.resolve("dev")).procRoot(tmp.resolve("proc"));
    }

    // ---------------------------------------------------------------- the stand-in kubelet

    /** A Registration server on kubelet.sock that, like the kubelet, dials back and asks for options before returning. */
    static final class Kubelet implements AutoCloseable {
        final Path dir;
        final EpollEventLoopGroup group = new EpollEventLoopGroup(2);
        final Server server;
        final BlockingQueue<RegisterRequest> registrations = new LinkedBlockingQueue<>();
        final List<String> protocolErrors = new CopyOnWriteArrayList<>();
        final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();
        final java.util.concurrent.atomic.AtomicInteger refuse = new java.util.concurrent.atomic.AtomicInteger();
        final java.util.concurrent.atomic.AtomicInteger refused = new java.util.concurrent.atomic.AtomicInteger();

        Kubelet(Path dir) throws Exception {
            this.dir = dir;
            server = NettyServerBuilder.forAddress(new DomainSocketAddress(dir.resolve("kubelet.sock").toString()))
                    .channelType(EpollServerDomainSocketChannel.class).bossEventLoopGroup(group)
                    .workerEventLoopGroup(group).addService(new RegistrationGrpc.RegistrationImplBase() {
                        @Override
                        public void register(RegisterRequest req, StreamObserver<Empty> out) {
                            if (refuse.getAndUpdate(x -> Math.max(0, x - 1)) > 0) {
                                refused.incrementAndGet();
                                out.onError(Status.UNKNOWN.withDescription("resource name already registered")
                                        .asRuntimeException());
                                return;
                            }
                            try {
                                if (!req.getVersion().equals("v1beta1")) {
                                    protocolErrors.add("version " + req.getVersion());
                                }
                                if (req.getEndpoint().contains("/")) {
                                    protocolErrors.add("endpoint not a file name " + req.getEndpoint());
                                }
                                Path sock = dir.resolve(req.getEndpoint());
                                if (!Files.exists(sock)) {
                                    protocolErrors.add("registered before serving: " + sock);
                                }
                                // dial back before answering, as the kubelet does
                                DevicePluginOptions o = stub(req.getEndpoint()).withDeadlineAfter(5, TimeUnit.SECONDS)
                                        .getDevicePluginOptions(Empty.getDefaultInstance());
                                if (!o.equals(req.getOptions())) {
                                    protocolErrors.add("options differ: " + o + " vs " + req.getOptions());
                                }
                                registrations.add(req);
                                out.onNext(Empty.getDefaultInstance());
                                out.onCompleted();
                            } catch (RuntimeException e) {
                                protocolErrors.add("dial back failed: " + e);
                                out.onError(Status.UNKNOWN.withDescription(e.toString()).asRuntimeException());
                            }
                        }
                    }).build().start();
        }

        ManagedChannel channel(String endpoint) {
            return channels.computeIfAbsent(endpoint, e -> NettyChannelBuilder
                    .forAddress(new DomainSocketAddress(dir.resolve(e).toString())).eventLoopGroup(group)
                    .channelType(EpollDomainSocketChannel.class).usePlaintext().build());
        }

        /** A fresh channel (a new connection), for tests that need the plug-in's current socket. */
        ManagedChannel freshChannel(String endpoint) {
            ManagedChannel old = channels.remove(endpoint);
            if (old != null) {
                old.shutdownNow();
            }
            return channel(endpoint);
        }

        DevicePluginGrpc.DevicePluginBlockingStub stub(String endpoint) {
            return DevicePluginGrpc.newBlockingStub(channel(endpoint));
        }

        RegisterRequest awaitRegistration() throws InterruptedException {
            RegisterRequest r = registrations.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            if (r == null) {
                fail("no registration within " + WAIT + "; protocol errors: " + protocolErrors);
            }
            return r;
        }

        @Override
        public void close() throws Exception {
            for (ManagedChannel c : channels.values()) {
                c.shutdownNow();
            }
            server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
        }
    }

    /** A ListAndWatch stream recorded as it arrives. */
    static final class Watch implements StreamObserver<ListAndWatchResponse> {
        final BlockingQueue<ListAndWatchResponse> lists = new LinkedBlockingQueue<>();
        volatile Throwable error;
        volatile boolean completed;

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

        ListAndWatchResponse next() throws InterruptedException {
            ListAndWatchResponse r = lists.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            if (r == null) {
                fail("no list within " + WAIT + " (error " + error + ", completed " + completed + ")");
            }
            return r;
        }
    }

    static Set<String> unhealthy(ListAndWatchResponse r) {
        return r.getDevicesList().stream().filter(d -> !d.getHealth().equals("Healthy")).map(Device::getID)
                .collect(Collectors.toSet());
    }

    static final String EP = "gpusched-nvidia.com-gpu.sock";

    static PreferredAllocationRequest pref(List<String> available, List<String> must, int size) {
        return PreferredAllocationRequest.newBuilder().addContainerRequests(ContainerPreferredAllocationRequest
                .newBuilder().addAllAvailableDeviceIDs(available).addAllMustIncludeDeviceIDs(must)
                .setAllocationSize(size)).build();
    }

    static List<String> uuids(SimulatedGpuInventory inv) {
        return inv.devices().stream().map(GpuDevice::uuid).toList();
    }

    static Status.Code codeOf(Runnable r) {
        try {
            r.run();
            return Status.Code.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus().getCode();
        }
    }

    // ---------------------------------------------------------------- independent score and exact search

    static int pcie(PcieLevel l) {
        return switch (l) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
    }

    static long score(GpuTopology t, List<Integer> set) {
        long s = 0;
        for (int i = 0; i < set.size(); i++) {
            for (int j = i + 1; j < set.size(); j++) {
                s += 100L * t.linkCount(set.get(i), set.get(j)) + pcie(t.pcieLevel(set.get(i), set.get(j)));
            }
        }
        return s;
    }

    /** The best set score over every subset of {@code available} of {@code size} holding {@code must}. */
    static long bestScore(GpuTopology t, List<Integer> available, Set<Integer> must, int size) {
        long best = Long.MIN_VALUE;
        int n = available.size();
        for (int mask = 0; mask < (1 << n); mask++) {
            if (Integer.bitCount(mask) != size) {
                continue;
            }
            List<Integer> set = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if ((mask & (1 << i)) != 0) {
                    set.add(available.get(i));
                }
            }
            if (set.containsAll(must)) {
                best = Math.max(best, score(t, set));
            }
        }
        return best;
    }

    // ---------------------------------------------------------------- registration and life cycle

    @Test
    void registersAfterServingAndSurvivesManyFastKubeletRestartsWithSocketDirWiped() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100")) {
            Kubelet k = new Kubelet(dir);
            try (KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
                RegisterRequest r = k.awaitRegistration();
                assertThat(r.getResourceName()).isEqualTo("nvidia.com/gpu");
                assertThat(r.getEndpoint()).isEqualTo(EP);
                assertThat(r.getOptions().getGetPreferredAllocationAvailable()).isTrue();
                for (int restart = 1; restart <= 6; restart++) {
                    // a new kubelet: the old one goes, every socket in the directory is deleted, kubelet.sock returns
                    k.close();
                    try (var files = Files.list(dir)) {
                        for (Path p : files.toList()) {
                            Files.deleteIfExists(p);
                        }
                    }
                    k = new Kubelet(dir);
                    RegisterRequest again = k.awaitRegistration();
                    assertThat(again.getEndpoint()).as("restart %d", restart).isEqualTo(EP);
                    assertThat(k.protocolErrors).as("restart %d", restart).isEmpty();
                    assertThat(k.stub(EP).getDevicePluginOptions(Empty.getDefaultInstance())
                            .getGetPreferredAllocationAvailable()).isTrue();
                    Watch w = new Watch();
                    DevicePluginGrpc.newStub(k.channel(EP)).listAndWatch(Empty.getDefaultInstance(), w);
                    assertThat(w.next().getDevicesCount()).as("restart %d", restart).isEqualTo(8);
                }
                // no stray registrations left over from a restart (one per kubelet start)
                Thread.sleep(500);
                assertThat(k.registrations).isEmpty();
                assertThat(k.protocolErrors).isEmpty();
            } finally {
                k.close();
            }
            // close() removes its socket
            assertThat(dir.resolve(EP)).doesNotExist();
        }
    }

    @Test
    void startedBeforeTheKubeletAndRefusedThriceItKeepsTryingAndRegistersOnce() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            Thread.sleep(500); // no kubelet yet: nothing to register with, and no crash
            assertThat(plugin.registrations()).isZero();
            try (Kubelet k = new Kubelet(dir)) {
                k.refuse.set(3);
                k.awaitRegistration();
                assertThat(k.refused.get()).isEqualTo(3);
                assertThat(k.protocolErrors).isEmpty();
                // the kubelet has the request; the plugin counts it once the answer is back (on a loaded machine
                // that can be later than any fixed pause): wait for it, up to 60 s
                for (int i = 0; i < 6000 && plugin.registrations() < 1; i++) {
                    Thread.sleep(10);
                }
                Thread.sleep(500); // room for a wrong second registration to show
                assertThat(k.registrations).as("one registration once accepted").isEmpty();
                assertThat(plugin.registrations()).isEqualTo(1);
            }
        }
    }

    @Test
    void itsOwnSocketDeletedItServesAndRegistersAgain() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx-h100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            for (int i = 0; i < 3; i++) {
                Files.delete(dir.resolve(EP));
                k.awaitRegistration();
                assertThat(dir.resolve(EP)).exists();
                assertThat(k.freshChannel(EP)).isNotNull();
                assertThat(k.stub(EP).getDevicePluginOptions(Empty.getDefaultInstance())
                        .getGetPreferredAllocationAvailable()).isTrue();
            }
            assertThat(k.protocolErrors).isEmpty();
        }
    }

    @Test
    void listAndWatchOpenedTwiceCancelledAndReopenedAllSeeEachChangeOnceAndHealthFlapsEndRight() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            Watch a = new Watch();
            Watch b = new Watch();
            var ctx = io.grpc.Context.current().withCancellation();
            DevicePluginGrpc.newStub(k.channel(EP)).listAndWatch(Empty.getDefaultInstance(), a);
            ctx.run(() -> DevicePluginGrpc.newStub(k.channel(EP)).listAndWatch(Empty.getDefaultInstance(), b));
            assertThat(unhealthy(a.next())).isEmpty();
            assertThat(unhealthy(b.next())).isEmpty();
            ctx.cancel(null); // the kubelet drops one stream
            String u2 = inv.devices().get(2).uuid();
            inv.setHealth(2, GpuHealth.unhealthy("XID 79"));
            assertThat(unhealthy(a.next())).containsExactly(u2);
            Watch c = new Watch();
            DevicePluginGrpc.newStub(k.channel(EP)).listAndWatch(Empty.getDefaultInstance(), c);
            assertThat(unhealthy(c.next())).as("a reopened stream starts with the current list").containsExactly(u2);
            // flapping, fast: the final state must be what every open stream ends on
            for (int i = 0; i < 200; i++) {
                inv.setHealth(2, i % 2 == 0 ? GpuHealth.HEALTHY : GpuHealth.unhealthy("XID 79"));
                inv.setHealth(6, i % 3 == 0 ? GpuHealth.unhealthy("XID 48") : GpuHealth.HEALTHY);
            }
            inv.setHealth(2, GpuHealth.HEALTHY);
            inv.setHealth(6, GpuHealth.unhealthy("XID 48"));
            String u6 = inv.devices().get(6).uuid();
            for (Watch w : List.of(a, c)) {
                ListAndWatchResponse last = null;
                ListAndWatchResponse prev = null;
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (System.nanoTime() < deadline) {
                    ListAndWatchResponse r = w.lists.poll(300, TimeUnit.MILLISECONDS);
                    if (r == null && last != null && unhealthy(last).equals(Set.of(u6))) {
                        break;
                    }
                    if (r != null) {
                        assertThat(r).as("never the same list twice in a row").isNotEqualTo(last);
                        assertThat(r.getDevicesCount()).isEqualTo(8);
                        r.getDevicesList().forEach(d -> assertThat(d.getHealth()).isIn("Healthy", "Unhealthy"));
                        prev = last;
                        last = r;
                    }
                }
                assertThat(last).isNotNull();
                assertThat(unhealthy(last)).isEqualTo(Set.of(u6));
                assertThat(w.error).isNull();
                assertThat(w.completed).isFalse();
            }
        }
    }

    // ---------------------------------------------------------------- GetPreferredAllocation, hostile

    @Test
    void malformedPreferredAllocationsAreInvalidArgumentAndThePluginKeepsServing() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            var s = k.stub(EP).withDeadlineAfter(30, TimeUnit.SECONDS);
            List<String> all = uuids(inv);
            List<String> four = all.subList(0, 4);
            List<String> tenK = new ArrayList<>(all);
            for (int i = 0; i < 10_000; i++) {
                tenK.add("GPU-bogus-" + i);
            }
            List<String> tenKRepeated = new ArrayList<>();
            for (int i = 0; i < 10_000; i++) {
                tenKRepeated.add(all.get(i % 8));
            }
            Map<String, PreferredAllocationRequest> bad = new java.util.LinkedHashMap<>();
            bad.put("size 0", pref(four, List.of(), 0));
            bad.put("size -1", pref(four, List.of(), -1));
            bad.put("size MIN", pref(four, List.of(), Integer.MIN_VALUE));
            bad.put("size over set", pref(four, List.of(), 5));
            bad.put("size MAX", pref(all, List.of(), Integer.MAX_VALUE));
            bad.put("unknown available id", pref(List.of(all.get(0), "GPU-nope"), List.of(), 1));
            bad.put("unknown must id", pref(four, List.of("GPU-nope"), 2));
            bad.put("must not in available", pref(four, List.of(all.get(7)), 2));
            bad.put("duplicate available", pref(List.of(all.get(0), all.get(0), all.get(1)), List.of(), 2));
            bad.put("duplicate must", pref(four, List.of(all.get(1), all.get(1)), 3));
            bad.put("must over size", pref(four, List.of(all.get(0), all.get(1), all.get(2)), 2));
            bad.put("empty available", pref(List.of(), List.of(), 1));
            bad.put("empty id", pref(List.of("", all.get(0)), List.of(), 1));
            bad.put("10k ids, unknown", pref(tenK, List.of(), 4));
            bad.put("10k ids, repeated", pref(tenKRepeated, List.of(), 4));
            bad.put("one good and one empty container request", PreferredAllocationRequest.newBuilder()
                    .addContainerRequests(pref(four, List.of(), 2).getContainerRequests(0))
                    .addContainerRequests(ContainerPreferredAllocationRequest.getDefaultInstance()).build());
            Map<String, Status.Code> got = new java.util.LinkedHashMap<>();
            for (var e : bad.entrySet()) {
                got.put(e.getKey(), codeOf(() -> s.getPreferredAllocation(e.getValue())));
            }
            assertThat(got)
                    .allSatisfy((name, code) -> assertThat(code).as(name).isEqualTo(Status.Code.INVALID_ARGUMENT));
            // still serving correctly
            PreferredAllocationResponse ok = s.getPreferredAllocation(pref(all, List.of(), 8));
            assertThat(new HashSet<>(ok.getContainerResponses(0).getDeviceIDsList())).isEqualTo(new HashSet<>(all));
            // an empty request (no container requests) is no crash either: empty answer or an error status
            Status.Code empty = codeOf(() -> s.getPreferredAllocation(PreferredAllocationRequest.getDefaultInstance()));
            assertThat(empty).isIn(Status.Code.OK, Status.Code.INVALID_ARGUMENT);
        }
    }

    @Test
    void preferredAllocationIsOptimalAndIndependentOfIdOrderOnDgx1AndDgxH100() throws Exception {
        for (String profile : List.of("dgx1-v100", "dgx-h100")) {
            Path d = Files.createDirectories(tmp.resolve(profile));
            try (SimulatedGpuInventory inv = GpuInventories.simulated(profile);
                 Kubelet k = new Kubelet(d);
                 KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, DevicePluginConfig.builder()
                         .pluginDirectory(d).registerRetry(Duration.ofMillis(100)).devRoot(tmp.resolve("dev"))
                         .procRoot(tmp.resolve("proc")).build())) {
                k.awaitRegistration();
                var s = k.stub(EP);
                GpuTopology t = inv.topology();
                List<String> all = uuids(inv);
                Random rnd = new Random(27);
                int checked = 0;
                for (int round = 0; round < 300; round++) {
                    List<Integer> avail = new ArrayList<>();
                    for (int i = 0; i < 8; i++) {
                        if (rnd.nextInt(4) != 0) {
                            avail.add(i);
                        }
                    }
                    if (avail.isEmpty()) {
                        continue;
                    }
                    int size = 1 + rnd.nextInt(avail.size());
                    List<Integer> shuffled = new ArrayList<>(avail);
                    Collections.shuffle(shuffled, rnd);
                    Set<Integer> must = new HashSet<>(shuffled.subList(0, rnd.nextInt(size + 1)));
                    long best = bestScore(t, avail, must, size);
                    Set<String> first = null;
                    for (int order = 0; order < 4; order++) {
                        List<String> a = avail.stream().map(all::get).collect(Collectors.toCollection(ArrayList::new));
                        List<String> m = must.stream().map(all::get).collect(Collectors.toCollection(ArrayList::new));
                        Collections.shuffle(a, rnd);
                        Collections.shuffle(m, rnd);
                        List<String> ans = s.getPreferredAllocation(pref(a, m, size)).getContainerResponses(0)
                                .getDeviceIDsList();
                        String what = profile + " avail " + avail + " must " + must + " size " + size + " order " + a;
                        assertThat(ans).as(what).hasSize(size).doesNotHaveDuplicates();
                        assertThat(a).as(what).containsAll(ans);
                        assertThat(ans).as(what).containsAll(m);
                        List<Integer> idx = ans.stream().map(all::indexOf).toList();
                        assertThat(score(t, idx)).as(what).isEqualTo(best);
                        if (first == null) {
                            first = new HashSet<>(ans);
                        } else {
                            assertThat(new HashSet<>(ans)).as("answer depends on id order: " + what).isEqualTo(first);
                        }
                        checked++;
                    }
                }
                assertThat(checked).isGreaterThan(800);
            }
        }
    }

    @Test
    void manyContainerRequestsInOneCallGetOneAnswerEachInOrder() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx-h100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            List<String> all = uuids(inv);
            PreferredAllocationRequest.Builder b = PreferredAllocationRequest.newBuilder();
            for (int i = 0; i < 500; i++) {
                int size = 1 + i % 8;
                b.addContainerRequests(ContainerPreferredAllocationRequest.newBuilder().addAllAvailableDeviceIDs(all)
                        .addMustIncludeDeviceIDs(all.get(i % 8)).setAllocationSize(size));
            }
            PreferredAllocationResponse r = k.stub(EP).getPreferredAllocation(b.build());
            assertThat(r.getContainerResponsesCount()).isEqualTo(500);
            for (int i = 0; i < 500; i++) {
                assertThat(r.getContainerResponses(i).getDeviceIDsList()).hasSize(1 + i % 8).contains(all.get(i % 8));
            }
        }
    }

    // ---------------------------------------------------------------- Allocate, hostile

    @Test
    void allocateRefusesUnknownAndDuplicateIdsWithInvalidArgument() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            var s = k.stub(EP);
            List<String> all = uuids(inv);
            Map<String, AllocateRequest> bad = new java.util.LinkedHashMap<>();
            bad.put("unknown", alloc(List.of("GPU-nope")));
            bad.put("known and unknown", alloc(List.of(all.get(0), "GPU-nope")));
            bad.put("duplicate", alloc(List.of(all.get(0), all.get(0))));
            bad.put("empty id", alloc(List.of("")));
            bad.put("empty container request", alloc(List.of()));
            bad.put("second container bad", AllocateRequest.newBuilder()
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(all.get(0)))
                    .addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds("GPU-nope")).build());
            Map<String, Status.Code> got = new java.util.LinkedHashMap<>();
            for (var e : bad.entrySet()) {
                got.put(e.getKey(), codeOf(() -> s.allocate(e.getValue())));
            }
            assertThat(got)
                    .allSatisfy((name, code) -> assertThat(code).as(name).isEqualTo(Status.Code.INVALID_ARGUMENT));
        }
    }

    @Test
    void allocateOfAnUnhealthyDeviceFails() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            Watch w = new Watch();
            DevicePluginGrpc.newStub(k.channel(EP)).listAndWatch(Empty.getDefaultInstance(), w);
            w.next();
            inv.setHealth(3, GpuHealth.lost("XID 79"));
            assertThat(unhealthy(w.next())).containsExactly(inv.devices().get(3).uuid());
            Status.Code c = codeOf(() -> k.stub(EP).allocate(alloc(List.of(inv.devices().get(3).uuid()))));
            assertThat(c).as("the API: if a device fails, send a ListAndWatch update and fail the Allocation")
                    .isNotEqualTo(Status.Code.OK).isNotEqualTo(Status.Code.UNKNOWN);
        }
    }

    @Test
    void manyContainerRequestsInOneAllocateEachGetTheirOwnDevices() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            List<String> all = uuids(inv);
            AllocateRequest.Builder b = AllocateRequest.newBuilder();
            for (int i = 0; i < 8; i++) {
                b.addContainerRequests(ContainerAllocateRequest.newBuilder().addDevicesIds(all.get(i))
                        .addDevicesIds(all.get((i + 3) % 8)));
            }
            AllocateResponse r = k.stub(EP).allocate(b.build());
            assertThat(r.getContainerResponsesCount()).isEqualTo(8);
            for (int i = 0; i < 8; i++) {
                String env = r.getContainerResponses(i).getEnvsMap().get("NVIDIA_VISIBLE_DEVICES");
                assertThat(env).isNotNull();
                assertThat(Set.of(env.split(","))).isEqualTo(Set.of(all.get(i), all.get((i + 3) % 8)));
            }
        }
    }

    static AllocateRequest alloc(List<String> ids) {
        return AllocateRequest.newBuilder()
                .addContainerRequests(ContainerAllocateRequest.newBuilder().addAllDevicesIds(ids)).build();
    }

    // ---------------------------------------------------------------- concurrency

    @Test
    void manyClientsAtOnceAllGetCorrectAnswersWhileHealthChanges() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx-h100");
             Kubelet k = new Kubelet(dir);
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config().build())) {
            k.awaitRegistration();
            List<String> all = uuids(inv);
            GpuTopology t = inv.topology();
            ExecutorService pool = Executors.newFixedThreadPool(16);
            List<ManagedChannel> own = new ArrayList<>();
            try {
                List<Future<List<String>>> fs = new ArrayList<>();
                for (int c = 0; c < 16; c++) {
                    ManagedChannel ch = NettyChannelBuilder
                            .forAddress(new DomainSocketAddress(dir.resolve(EP).toString()))
                            .eventLoopGroup(k.group).channelType(EpollDomainSocketChannel.class).usePlaintext().build();
                    own.add(ch);
                    int seed = c;
                    fs.add(pool.submit(() -> {
                        List<String> problems = new ArrayList<>();
                        Random rnd = new Random(seed);
                        var s = DevicePluginGrpc.newBlockingStub(ch).withDeadlineAfter(60, TimeUnit.SECONDS);
                        for (int i = 0; i < 150; i++) {
                            List<Integer> avail = IntStream.range(0, 8).filter(x -> rnd.nextBoolean()).boxed().toList();
                            if (avail.isEmpty()) {
                                continue;
                            }
                            int size = 1 + rnd.nextInt(avail.size());
                            List<String> a = new ArrayList<>(avail.stream().map(all::get).toList());
                            Collections.shuffle(a, rnd);
                            List<String> ans = s.getPreferredAllocation(pref(a, List.of(), size))
                                    .getContainerResponses(0).getDeviceIDsList();
                            long got = score(t, ans.stream().map(all::indexOf).toList());
                            long best = bestScore(t, avail, Set.of(), size);
                            if (ans.size() != size || !a.containsAll(ans) || got != best) {
                                problems.add(
                                        avail + " size " + size + " -> " + ans + " score " + got + " best " + best);
                            }
                            AllocateResponse r;
                            try {
                                r = s.allocate(alloc(ans));
                            } catch (StatusRuntimeException e) {
                                // health flaps meanwhile: refusing a device that is Unhealthy now is the API's contract
                                if (e.getStatus().getCode() != Status.Code.FAILED_PRECONDITION) {
                                    problems.add("allocate " + ans + " -> " + e.getStatus());
                                }
                                continue;
                            }
                            String env = r.getContainerResponses(0).getEnvsMap().get("NVIDIA_VISIBLE_DEVICES");
                            if (env == null || !Set.of(env.split(",")).equals(new HashSet<>(ans))) {
                                problems.add("allocate " + ans + " -> " + env);
                            }
                        }
                        return problems;
                    }));
                }
                for (int i = 0; i < 100; i++) {
                    inv.setHealth(i % 8, i % 2 == 0 ? GpuHealth.unhealthy("XID 48") : GpuHealth.HEALTHY);
                }
                for (int i = 0; i < 8; i++) {
                    inv.setHealth(i, GpuHealth.HEALTHY);
                }
                List<String> problems = new ArrayList<>();
                for (Future<List<String>> f : fs) {
                    problems.addAll(f.get(120, TimeUnit.SECONDS));
                }
                assertThat(problems).isEmpty();
            } finally {
                pool.shutdownNow();
                own.forEach(ManagedChannel::shutdownNow);
            }
        }
    }
}
