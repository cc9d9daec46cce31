package io.gpusched.core;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A child JVM for {@link LedgerForceOrderTest}: {@code threads} threads each make {@code pairs} allocate+release
 * pairs on a durable scheduler and print, on standard output, {@code ACK A <id>} once an allocation was returned to
 * them and {@code ACK R <id>} once its release was. The test reads those lines through the fsync shim, which puts
 * them in one order with the ledger's writes and forces. Arguments: stateDir threads pairs.
 *
 * <p>Run by hand: {@code java -cp <gpu-core test classpath> io.gpusched.core.ForcedAckChild DIR 8 100}.
 */
public final class ForcedAckChild {
    private ForcedAckChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        int pairs = Integer.parseInt(args[2]);
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            ExecutorService pool = Executors.newFixedThreadPool(threads);
            CountDownLatch go = new CountDownLatch(1);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                fs.add(pool.submit(() -> {
                    go.await();
                    for (int i = 0; i < pairs; i++) {
                        Allocation a = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build());
                        System.out.println("ACK A " + a.id());
                        if (!s.release(a.id())) {
                            throw new IllegalStateException("release of " + a.id() + " returned false");
                        }
                        System.out.println("ACK R " + a.id());
                    }
                    return null;
                }));
            }
            go.countDown();
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
        }
        System.out.println("DONE");
    }
}
