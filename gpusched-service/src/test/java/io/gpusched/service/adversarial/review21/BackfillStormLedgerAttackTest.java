package io.gpusched.service.adversarial.review21;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LedgerReader;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review21: races between the backfilling passes and releases, cancels and requests that do not wait, checked by an
 * independent reader of the ledger (gpusched-testing LedgerReader). Five users (quota 3 GPUs each) for 15 s: waiting
 * requests (exclusive by count or by name, shared, whole-node shared) whose clients vanish at random moments, requests
 * that do not wait, and releases as soon as a grant comes. Afterwards the ledger's history must show no GPU granted
 * twice, no user ever over the quota, and nothing left live; and the queue must be empty.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class BackfillStormLedgerAttackTest {

    private static final String[][] SHAPES = {{"--gpu=1"}, {"--gpu=2"}, {"--gpu=3"}, {"--devices=0"}, {"--devices=5"},
        {"--gpu=1", "--shared=8GB"}, {"--gpu=3", "--shared=20GB"}, {"--devices=0,1", "--shared=12GB"},
        {"--gpu=2", "--shared=4GB"}};

    @Test
    void noDoubleGrantNoQuotaOverrunNothingLeftLive(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).service(ServiceSettings
                .defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            ConcurrentLinkedQueue<String> odd = new ConcurrentLinkedQueue<>();
            AtomicInteger grants = new AtomicInteger();
            List<Thread> threads = new ArrayList<>();
            for (int u = 0; u < 5; u++) {
                Caller c = ServiceBed.caller("gsu-storm" + u, 62140 + u, false);
                for (int k = 0; k < 3; k++) {
                    Random rnd = new Random(1000L * u + k);
                    Thread t = new Thread(() -> {
                        while (System.nanoTime() < until) {
                            String[] shape = SHAPES[rnd.nextInt(SHAPES.length)];
                            boolean waits = rnd.nextInt(3) > 0;
                            long goneAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(rnd.nextInt(400));
                            boolean vanishes = rnd.nextInt(3) == 0;
                            Allocation a = null;
                            try {
                                a = s.allocate(c, GpuRequests.fromCliFlags(List.of(shape)),
                                        waits ? Optional.of(Duration.ofMillis(50 + rnd.nextInt(1500)))
                                                : Optional.empty(),
                                        () -> vanishes && System.nanoTime() > goneAt);
                                grants.incrementAndGet();
                                Thread.sleep(rnd.nextInt(60));
                            } catch (GpuAllocationException | InterruptedException e) {
                                // refused or waited out: fine
                            } catch (GpuException e) {
                                // dropped (client gone): fine
                            } catch (RuntimeException e) {
                                odd.add(String.join(" ", shape) + ": " + e);
                            } finally {
                                if (a != null) {
                                    try {
                                        s.release(c, a.id());
                                    } catch (Exception e) {
                                        odd.add("release " + a.id() + ": " + e);
                                    }
                                }
                            }
                        }
                    });
                    t.setDaemon(true);
                    t.start();
                    threads.add(t);
                }
            }
            for (Thread t : threads) {
                t.join(TimeUnit.SECONDS.toMillis(60));
            }
            assertThat(threads.stream().filter(Thread::isAlive).count()).as("storm threads still running").isZero();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (!s.queueView().isEmpty() && System.nanoTime() < end) {
                Thread.sleep(100);
            }
            Thread.sleep(1000); // a grant made for a vanished client is released by the dispatcher right after
            LedgerReader r = LedgerReader.read(bed.state);
            assertThat(grants.get()).as("grants made in the storm").isPositive();
            assertThat(r.doubleGrants).as("GPUs granted twice (ledger history)").isEmpty();
            assertThat(r.peakGpusByOwner.values()).as("most GPUs any user held at once (quota 3): %s",
                    r.peakGpusByOwner).allMatch(n -> n <= 3);
            assertThat(r.live).as("allocations left live after every client released or vanished").isEmpty();
            assertThat(s.queueView()).as("requests left in the queue").isEmpty();
            assertThat(odd).as("unexpected answers").isEmpty();
        }
    }
}
