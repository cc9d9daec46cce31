package io.gpusched.core.adversarial.topology;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * One {@link TopologyAwareStrategy} instance shared by schedulers of different nodes in several threads at once (a
 * host that builds its strategy once and hands it to every scheduler): since the split the strategy keeps per-topology
 * scores and a spare of the search's tables between calls. Each thread drives two schedulers of the same node in
 * lockstep with the same random requests and releases, one with the shared instance and one with an instance of its
 * own used by nobody else; every answer (the devices, or the refusal's reason) must be the same. Nothing is asked of
 * the strategy but what a scheduler asks; the comparison is the test's.
 */
@Tag("adversarial")
class SharedStrategyInstanceAttackTest {

    private static GpuScheduler scheduler(String profile, TopologyAwareStrategy s) {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile(profile)).strategy(s)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static String answer(GpuScheduler s, GpuRequest r, List<String> held) {
        try {
            Allocation a = s.allocate(r);
            held.add(a.id());
            return a.deviceIndices().toString();
        } catch (GpuAllocationException e) {
            return "refused " + e.reason();
        }
    }

    @Test
    void aStrategySharedAcrossNodesAndThreadsAnswersAsAPrivateOneDoes() throws Exception {
        for (TopologyAwareStrategy.Objective objective : TopologyAwareStrategy.Objective.values()) {
            TopologyAwareStrategy shared = new TopologyAwareStrategy(objective);
            String[] profiles = {"dgx1-v100", "dgx-h100", "pcie-4xa10", "mi210-8x", "dgx1-v100", "mi210-8x"};
            ConcurrentLinkedQueue<String> differences = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            int[] answers = new int[profiles.length];
            for (int t = 0; t < profiles.length; t++) {
                int me = t;
                Thread th = new Thread(() -> {
                    Random rnd = new Random(100 + me);
                    try (GpuScheduler a = scheduler(profiles[me], shared);
                         GpuScheduler b = scheduler(profiles[me], new TopologyAwareStrategy(objective))) {
                        start.await();
                        List<String> heldA = new ArrayList<>();
                        List<String> heldB = new ArrayList<>();
                        for (int step = 0; step < 300; step++) {
                            if (!heldA.isEmpty() && rnd.nextInt(3) == 0) {
                                int i = rnd.nextInt(heldA.size());
                                assertTrue(a.release(heldA.remove(i)));
                                assertTrue(b.release(heldB.remove(i)));
                                continue;
                            }
                            GpuRequest.Builder rb = GpuRequest.builder().count(1 + rnd.nextInt(4));
                            if (rnd.nextInt(4) == 0) {
                                rb.shared(MemorySize.ofGibibytes(1 + rnd.nextInt(4)));
                            } else {
                                rb.exclusive();
                            }
                            GpuRequest r = rb.build();
                            String x = answer(a, r, heldA);
                            String y = answer(b, r, heldB);
                            answers[me]++;
                            if (!x.equals(y)) {
                                differences.add(profiles[me] + " step " + step + " " + r.describe() + ": shared "
                                        + x + ", private " + y);
                            }
                            if (heldA.size() != heldB.size()) {
                                return; // the two have diverged; reported above
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                });
                th.start();
                threads.add(th);
            }
            start.countDown();
            for (Thread th : threads) {
                th.join();
            }
            assertEquals(List.of(), new ArrayList<>(errors), objective + ": errors");
            assertEquals(List.of(), new ArrayList<>(differences), objective + ": answers differ");
            for (int n : answers) {
                assertTrue(n > 100, objective + ": each thread asked many times: " + n);
            }
        }
    }
}
