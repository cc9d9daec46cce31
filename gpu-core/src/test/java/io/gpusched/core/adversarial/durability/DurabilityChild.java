package io.gpusched.core.adversarial.durability;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;

/**
 * Child JVM of the durability attacks. {@code threads} threads each make {@code pairs} allocate+release pairs on a
 * durable scheduler over {@code dir}; after each call returns it prints {@code ACK A <id>}, {@code ACK R <id>} or
 * {@code FAIL A|R <message>} and goes on. At the end it prints {@code LIVE <ids>} (the scheduler's own view) and
 * {@code DONE}. Arguments: dir threads pairs [holdEvery: keep every n-th allocation instead of releasing it].
 */
public final class DurabilityChild {
    private DurabilityChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        int pairs = Integer.parseInt(args[2]);
        int holdEvery = args.length > 3 ? Integer.parseInt(args[3]) : 0;
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread th = new Thread(() -> {
                    try {
                        go.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    for (int i = 0; i < pairs; i++) {
                        Allocation a;
                        try {
                            a = s.allocate(GpuRequest.builder().shared(MemorySize.ofMebibytes(1)).build());
                        } catch (RuntimeException e) {
                            System.out.println("FAIL A " + e.getClass().getSimpleName() + ": "
                                    + String.valueOf(e.getMessage()).replace('\n', ' '));
                            continue;
                        }
                        System.out.println("ACK A " + a.id());
                        if (holdEvery > 0 && i % holdEvery == 0) {
                            continue;
                        }
                        try {
                            if (!s.release(a.id())) {
                                System.out.println("FAIL R " + a.id() + " returned false");
                                continue;
                            }
                        } catch (RuntimeException e) {
                            System.out.println("FAIL R " + a.id() + " " + e.getClass().getSimpleName() + ": "
                                    + String.valueOf(e.getMessage()).replace('\n', ' '));
                            continue;
                        }
                        System.out.println("ACK R " + a.id());
                    }
                });
                th.start();
                ts.add(th);
            }
            go.countDown();
            for (Thread th : ts) {
                th.join();
            }
            System.out.println("LIVE " + s.allocations().stream().map(Allocation::id).sorted()
                    .collect(Collectors.joining(",")));
        }
        System.out.println("DONE");
    }
}
