package io.gpusched.server;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Load on loopback, run by hand (not a CI test): N event-stream clients stay connected while REST GETs arrive at a
 * fixed rate for a fixed time; reports errors, latency percentiles, events received and heap after GC.
 * Arguments: sseClients requestsPerSecond seconds (default 200 1000 30).
 */
public final class LoadHarness {
    private LoadHarness() {
    }

    public static void main(String[] args) throws Exception {
        int clients = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        int rate = args.length > 1 ? Integer.parseInt(args[1]) : 1000;
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 30;
        Path state = Files.createTempDirectory("gpusched-load");
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            long heapBefore = heapAfterGc();
            AtomicLong sseBytes = new AtomicLong();
            AtomicLong sseErrors = new AtomicLong();
            List<Socket> sockets = new ArrayList<>();
            ExecutorService readers = Executors.newCachedThreadPool();
            for (int i = 0; i < clients; i++) {
                Socket sock = new Socket(c.address().getAddress(), c.address().getPort());
                sockets.add(sock);
                OutputStream o = sock.getOutputStream();
                o.write("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
                        .getBytes(StandardCharsets.US_ASCII));
                o.flush();
                readers.execute(() -> {
                    try (InputStream in = sock.getInputStream()) {
                        byte[] buf = new byte[16384];
                        int r;
                        while ((r = in.read(buf)) > 0) {
                            sseBytes.addAndGet(r);
                        }
                    } catch (java.io.IOException e) {
                        if (!sock.isClosed()) {
                            sseErrors.incrementAndGet();
                        }
                    }
                });
            }
            while (c.eventClients() < clients) {
                Thread.sleep(50);
            }
            HttpClient http = HttpClient.newBuilder().executor(Executors.newFixedThreadPool(32)).build();
            String[] paths = {"/api/v1/devices", "/api/v1/allocations", "/api/v1/node", "/metrics", "/api/v1/topology"};
            int total = rate * seconds;
            long[] latencies = new long[total];
            AtomicLong errors = new AtomicLong();
            AtomicLong done = new AtomicLong();
            ExecutorService senders = Executors.newFixedThreadPool(64);
            long start = System.nanoTime();
            for (int i = 0; i < total; i++) {
                long due = start + (long) i * 1_000_000_000L / rate;
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                int n = i;
                senders.execute(() -> {
                    long t0 = System.nanoTime();
                    try {
                        HttpResponse<byte[]> r = http.send(HttpRequest.newBuilder(URI.create(c.url()
                                + paths[n % paths.length])).timeout(Duration.ofSeconds(10)).build(),
                                HttpResponse.BodyHandlers.ofByteArray());
                        if (r.statusCode() != 200) {
                            errors.incrementAndGet();
                        }
                    } catch (Exception e) {
                        errors.incrementAndGet();
                    }
                    latencies[n] = System.nanoTime() - t0;
                    done.incrementAndGet();
                });
            }
            senders.shutdown();
            senders.awaitTermination(60, java.util.concurrent.TimeUnit.SECONDS);
            double elapsed = (System.nanoTime() - start) / 1e9;
            int connected = c.eventClients();
            long heapAfter = heapAfterGc();
            long[] sorted = Arrays.stream(latencies).filter(x -> x > 0).sorted().toArray();
            System.out.printf("sse clients %d (still connected %d, stream errors %d, %.1f MB of events)%n", clients,
                    connected, sseErrors.get(), sseBytes.get() / 1e6);
            System.out.printf("rest requests %d in %.1f s = %.0f/s, errors %d%n", done.get(), elapsed,
                    done.get() / elapsed, errors.get());
            System.out.printf("latency ms p50 %.2f p99 %.2f max %.2f%n", sorted[sorted.length / 2] / 1e6,
                    sorted[(int) (sorted.length * 0.99)] / 1e6, sorted[sorted.length - 1] / 1e6);
            System.out.printf("heap after GC: before %.1f MB, after %.1f MB; threads %d%n", heapBefore / 1e6,
                    heapAfter / 1e6, Thread.activeCount());
            for (Socket sock : sockets) {
                sock.close();
            }
            readers.shutdownNow();
        }
        System.exit(0);
    }

    private static long heapAfterGc() {
        System.gc();
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }
}
