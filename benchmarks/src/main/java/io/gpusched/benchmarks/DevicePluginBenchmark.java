package io.gpusched.benchmarks;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.kubernetes.DevicePluginConfig;
import io.gpusched.kubernetes.KubeletDevicePlugin;
import io.gpusched.kubernetes.PreferredAllocator;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.Empty;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.RegisterRequest;
import io.gpusched.kubernetes.api.v1beta1.RegistrationGrpc;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * GetPreferredAllocation end to end over the plug-in's Unix socket (a kubelet-like client: one blocking call at a time)
 * against go-gpuallocator's best-effort search ({@link GoGpuAllocatorBestEffort}, in process, no socket) in the same
 * run, and the plug-in's own search in process (no socket). Per node and request size: median and p99 of per-call wall
 * time, in microseconds. A harness, not JMH: it needs a real socket and
 * a registration. Usage: {@code DevicePluginBenchmark [calls] [baselineBudgetSeconds]}.
 */
public final class DevicePluginBenchmark {
    private DevicePluginBenchmark() {
    }

    /** @param args calls per case (default 3000), seconds the baseline may spend per case (default 20) */
    public static void main(String[] args) throws Exception {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 3000;
        int budget = args.length > 1 ? Integer.parseInt(args[1]) : 20;
        System.out.printf("%-10s %4s %4s | %12s %12s | %12s %12s | %14s %14s %8s%n", "node", "n", "k",
                "socket med", "socket p99", "search med", "search p99", "go-ga med", "go-ga p99", "go-ga n");
        for (String node : List.of("dgx1-v100", "dgx-h100", "dgx1-x2", "parts-64")) {
            for (int k : List.of(2, 4, 8)) {
                run(node, k, calls, budget);
            }
        }
    }

    private static void run(String node, int k, int calls, int budgetSeconds) throws Exception {
        Path dir = Files.createTempDirectory("gpusched-dp-bench");
        ExecutorService ex = Executors.newCachedThreadPool(UnixSockets.daemon("bench-kubelet"));
        BlockingQueue<RegisterRequest> registered = new ArrayBlockingQueue<>(4);
        try (UnixSockets sockets = new UnixSockets("bench");
             GpuInventory inv = Nodes.named(node)) {
            Server kubelet = sockets.serve(dir.resolve("kubelet.sock"), ex,
                    new RegistrationGrpc.RegistrationImplBase() {
                        @Override
                        public void register(RegisterRequest r, StreamObserver<Empty> out) {
                            registered.add(r);
                            out.onNext(Empty.getDefaultInstance());
                            out.onCompleted();
                        }
                    });
            DevicePluginConfig config = DevicePluginConfig.builder().pluginDirectory(dir)
                    .recoveryHold(Duration.ZERO).build();
            try (KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config)) {
                RegisterRequest r = registered.poll(30, TimeUnit.SECONDS);
                if (r == null) {
                    throw new IllegalStateException("the plug-in did not register");
                }
                ManagedChannel ch = sockets.channel(dir.resolve(r.getEndpoint()));
                DevicePluginGrpc.DevicePluginBlockingStub stub = DevicePluginGrpc.newBlockingStub(ch);
                List<GpuDevice> devices = inv.devices();
                int n = devices.size();
                // the kubelet's view: every device free; available ids in a shuffled order, as the kubelet sends them
                List<String> ids = new ArrayList<>(devices.stream().map(GpuDevice::uuid).toList());
                Collections.shuffle(ids, new Random(k * 31L + n));
                PreferredAllocationRequest req = PreferredAllocationRequest.newBuilder().addContainerRequests(
                        ContainerPreferredAllocationRequest.newBuilder().addAllAvailableDeviceIDs(ids)
                                .setAllocationSize(k))
                        .build();
                for (int i = 0; i < Math.max(2000, calls / 2); i++) {
                    stub.getPreferredAllocation(req);
                }
                long[] ours = new long[calls];
                for (int i = 0; i < calls; i++) {
                    long t0 = System.nanoTime();
                    stub.getPreferredAllocation(req);
                    ours[i] = System.nanoTime() - t0;
                }
                UnixSockets.close(ch);
                // the same search in process, no socket: what the plug-in adds to a call besides gRPC
                PreferredAllocator direct = new PreferredAllocator(plugin.resources().get(0), devices, inv.topology(),
                        TopologyAwareStrategy.Objective.SET);
                for (int i = 0; i < 5000; i++) {
                    direct.prefer(ids, List.of(), k);
                }
                long[] search = new long[calls];
                for (int i = 0; i < calls; i++) {
                    long t0 = System.nanoTime();
                    direct.prefer(ids, List.of(), k);
                    search[i] = System.nanoTime() - t0;
                }
                String base = baseline(inv, k, n, budgetSeconds);
                System.out.printf("%-10s %4d %4d | %12.1f %12.1f | %12.1f %12.1f | %s%n", node, n, k,
                        pct(ours, 50) / 1e3, pct(ours, 99) / 1e3, pct(search, 50) / 1e3, pct(search, 99) / 1e3, base);
            }
            kubelet.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        } finally {
            ex.shutdownNow();
        }
    }

    /** Times the baseline while it fits the budget; states how many calls it made. */
    private static String baseline(GpuInventory inv, int k, int n, int budgetSeconds) {
        if (partitions(n, k) > 5e7) {
            return String.format("%14s %14s %8s", "cannot run", "", "~" + String.format("%.1e", partitions(n, k)));
        }
        GoGpuAllocatorBestEffort g = new GoGpuAllocatorBestEffort(inv.topology());
        List<Integer> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            all.add(i);
        }
        List<Long> times = new ArrayList<>();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(budgetSeconds);
        for (int i = 0; i < 200 && (times.size() < 5 || System.nanoTime() < until); i++) {
            long t0 = System.nanoTime();
            g.allocate(all, List.of(), k);
            long dt = System.nanoTime() - t0;
            if (i >= Math.min(20, 200 / 4) || dt > 50_000_000L) {
                times.add(dt);
            }
            if (System.nanoTime() > until && times.size() >= 5) {
                break;
            }
        }
        long[] t = times.stream().mapToLong(Long::longValue).toArray();
        return String.format("%14.1f %14.1f %8d", pct(t, 50) / 1e3, pct(t, 99) / 1e3, t.length);
    }

    /** Partitions of n (padded to a multiple of k) into sets of k: n! / ((k!)^(n/k) (n/k)!). */
    static double partitions(int n, int k) {
        int p = (n + k - 1) / k * k;
        double logs = lf(p) - (p / k) * lf(k) - lf(p / k);
        return Math.exp(logs);
    }

    private static double lf(int x) {
        double s = 0;
        for (int i = 2; i <= x; i++) {
            s += Math.log(i);
        }
        return s;
    }

    private static double pct(long[] v, int p) {
        long[] s = v.clone();
        Arrays.sort(s);
        int i = (int) Math.ceil(p / 100.0 * s.length) - 1;
        return s[Math.max(0, Math.min(s.length - 1, i))];
    }
}
