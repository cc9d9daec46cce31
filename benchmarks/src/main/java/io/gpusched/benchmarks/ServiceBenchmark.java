package io.gpusched.benchmarks;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.server.ConsoleServer;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceRoutes;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * allocate + release of one GPU through the node service (HTTP/1.1 over its Unix socket, keep-alive, as the client
 * library speaks it) against the same pair in one process, on the same kind of durable node ledger (a fresh state
 * directory per measurement, on a real disk), in the same run: 1 client against 1 in-process thread, 64 clients
 * against 8 in-process threads. Each measurement runs {@code rounds} times; the report gives medians and ranges (a
 * plain main harness, not JMH: it needs the socket and forced writes).
 *
 * <pre>
 * java -cp ... io.gpusched.benchmarks.ServiceBenchmark DIR [rounds] [seconds]
 * </pre>
 *
 * <p>The node's accounting sampler forces each ended allocation's last usage interval to disk in the releasing thread
 * (an acknowledged release has its record). {@code -Dgpusched.bench.accounting=} chooses where it runs: {@code on}
 * (the default) on both sides, the in-process scheduler with the same sampler attached as a host embedding the
 * accounting module would attach it; {@code off} on neither; {@code service} in the service only (its default
 * against a bare scheduler: the ledger's forced writes alike, the service's one more).
 */
public final class ServiceBenchmark {
    /** where the node's accounting sampler runs: on (both sides), off (neither), service (the service only) */
    private static final String ACCOUNTING = System.getProperty("gpusched.bench.accounting", "on");

    private ServiceBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        Files.createDirectories(dir);
        if (!List.of("on", "off", "service").contains(ACCOUNTING)) {
            throw new IllegalArgumentException("-Dgpusched.bench.accounting=" + ACCOUNTING
                    + ": expected on, off or service");
        }
        System.out.println("accounting sampler: " + ACCOUNTING);
        double[] in1 = new double[rounds];
        double[] svc1 = new double[rounds];
        double[] in8 = new double[rounds];
        double[] svc64 = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            in1[r] = inProcess(dir.resolve("i1-" + r), 1, seconds);
            svc1[r] = service(dir.resolve("s1-" + r), 1, seconds);
            in8[r] = inProcess(dir.resolve("i8-" + r), 8, seconds);
            svc64[r] = service(dir.resolve("s64-" + r), 64, seconds);
            System.out.printf(Locale.ROOT, "round %d: in-process 1 thread %.0f/s, service 1 client %.0f/s,"
                    + " in-process 8 threads %.0f/s, service 64 clients %.0f/s%n", r + 1, in1[r], svc1[r], in8[r],
                    svc64[r]);
        }
        double[] ratio1 = new double[rounds];
        double[] ratio64 = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            ratio1[r] = in1[r] / svc1[r];
            ratio64[r] = svc64[r] / in8[r];
        }
        report("in-process, 1 thread (pairs/s)", in1);
        report("service, 1 client (pairs/s)", svc1);
        report("in-process, 8 threads (pairs/s)", in8);
        report("service, 64 clients (pairs/s)", svc64);
        report("time per pair, service 1 client / in-process 1 thread (goal <= 2x)", ratio1);
        report("throughput, service 64 clients / in-process 8 threads (goal >= 0.5x)", ratio64);
    }

    private static void report(String what, double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        System.out.printf(Locale.ROOT, "%-75s median %.2f (%.2f-%.2f, %d rounds)%n", what, s[s.length / 2], s[0],
                s[s.length - 1], s.length);
    }

    private static GpuScheduler scheduler(Path state) {
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(state)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    /** @return allocate+release pairs per second of {@code threads} threads calling the scheduler directly */
    static double inProcess(Path state, int threads, int seconds) throws Exception {
        try (GpuScheduler s = scheduler(state)) {
            Optional<AccountingSampler> sampler = "on".equals(ACCOUNTING)
                    ? AccountingSampler.open(AccountingStore.at(state), AccountingSettings.defaults(), s.inventory(),
                            null, new HostIdleEffects(s), Clock.systemUTC())
                    : Optional.empty();
            sampler.ifPresent(s::addListener);
            try {
                return run(threads, seconds, i -> () -> {
                    Allocation a = s.allocate(GpuRequest.builder().owner("bench").ownerUid(0).build());
                    s.release(a.id());
                });
            } finally {
                sampler.ifPresent(x -> {
                    s.removeListener(x);
                    x.close();
                });
            }
        }
    }

    /** @return allocate+release pairs per second of {@code clients} keep-alive clients of the service's socket */
    static double service(Path state, int clients, int seconds) throws Exception {
        Path socket = state.resolveSibling(state.getFileName() + ".sock");
        try (GpuScheduler s = scheduler(state);
             NodeService svc = NodeService.builder().scheduler(s).config(GpuConfig.defaults()).stateDir(state)
                     .jobs(null, "benchmark").build().start()) {
            ServiceRoutes routes = new ServiceRoutes(svc);
            ConsoleServer.Builder b = ConsoleServer.builder().scheduler(s).stateDir(state).listen(
                    new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket).threads(256);
            if ("off".equals(ACCOUNTING)) {
                b.accounting(AccountingSettings.parse("gpu:\n  accounting:\n    enabled: false\n", "ServiceBenchmark"));
            }
            routes.routes().forEach(b::route);
            try (ConsoleServer c = b.build()) {
                routes.console(c::serveOwn);
                c.start();
                // more clients than GPUs: each waits its turn in the service's fair queue (without a wait, a
                // request on a full node is refused at once)
                String body = clients > 8 ? "{\"flags\":[\"--gpu=1\"],\"wait\":\"1m\"}"
                        : "{\"flags\":[\"--gpu=1\"]}";
                return run(clients, seconds, i -> {
                    Client cl = new Client(socket);
                    return () -> {
                        String a = cl.call("POST", "/api/v1/allocations", body, 201);
                        int at = a.indexOf("\"id\":\"") + 6;
                        String id = a.substring(at, a.indexOf('"', at));
                        cl.call("DELETE", "/api/v1/allocations/" + id, null, 200);
                    };
                });
            }
        }
    }

    /** One keep-alive HTTP/1.1 connection over the socket (a minimal client: Content-Length answers only). */
    static final class Client {
        private final SocketChannel ch;
        private final ByteBuffer in = ByteBuffer.allocate(1 << 16);

        Client(Path socket) throws IOException {
            ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            ch.connect(UnixDomainSocketAddress.of(socket));
        }

        String call(String method, String path, String body, int expect) throws IOException {
            byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            String head = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + b.length
                    + "\r\n\r\n";
            ByteBuffer out = ByteBuffer.allocate(head.length() + b.length);
            out.put(head.getBytes(StandardCharsets.ISO_8859_1)).put(b).flip();
            while (out.hasRemaining()) {
                ch.write(out);
            }
            in.clear();
            while (true) {
                if (ch.read(in) < 0) {
                    throw new IOException("connection closed");
                }
                String s = new String(in.array(), 0, in.position(), StandardCharsets.ISO_8859_1);
                int end = s.indexOf("\r\n\r\n");
                if (end < 0) {
                    continue;
                }
                int cl = s.toLowerCase(Locale.ROOT).indexOf("content-length:");
                int len = cl < 0 ? 0 : Integer.parseInt(s.substring(cl + 15, s.indexOf("\r\n", cl)).strip());
                if (in.position() >= end + 4 + len) {
                    int status = Integer.parseInt(s.substring(9, 12));
                    if (status != expect) {
                        throw new IOException(method + " " + path + ": " + s);
                    }
                    return s.substring(end + 4, end + 4 + len);
                }
            }
        }
    }

    interface Op {
        void run() throws Exception;
    }

    interface OpFactory {
        Op make(int worker) throws Exception;
    }

    private static double run(int workers, int seconds, OpFactory ops) throws Exception {
        ExecutorService ex = Executors.newFixedThreadPool(workers);
        try {
            CountDownLatch go = new CountDownLatch(1);
            long[] deadline = new long[1];
            List<Future<Long>> done = new ArrayList<>();
            for (int w = 0; w < workers; w++) {
                Op op = ops.make(w);
                done.add(ex.submit(() -> {
                    go.await();
                    long n = 0;
                    while (System.nanoTime() - deadline[0] < 0) {
                        op.run();
                        n++;
                    }
                    return n;
                }));
            }
            long start = System.nanoTime();
            deadline[0] = start + TimeUnit.SECONDS.toNanos(seconds);
            go.countDown();
            long total = 0;
            for (Future<Long> f : done) {
                total += f.get();
            }
            return total / ((System.nanoTime() - start) / 1e9);
        } finally {
            ex.shutdownNow();
        }
    }
}
