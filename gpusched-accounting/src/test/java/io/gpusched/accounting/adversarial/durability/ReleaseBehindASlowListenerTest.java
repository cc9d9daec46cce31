package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Writes": a release's last interval is written when the sampler gets its event, and listeners get
 * events in the order the changes were applied (Ledger.deliver). While another listener takes its time over an
 * earlier grant (carol's, on carol's thread), bob's {@code release} returns without waiting for it (waiting could
 * deadlock a listener that needs a lock the releasing caller holds), and his record is written once delivery catches
 * up: exactly one record ends his allocation. (Found by review: the docs had said a release that returned always has
 * its record on disk; they now say when it does, and what a crash in between loses.)
 */
@Tag("adversarial")
class ReleaseBehindASlowListenerTest {
    @TempDir
    Path dir;

    private static List<JsonNode> ends(List<JsonNode> records, String id) {
        List<JsonNode> out = new ArrayList<>();
        for (JsonNode n : records) {
            if (JournalLines.interval(n) && id.equals(n.get("id").asText()) && n.hasNonNull("end")) {
                out.add(n);
            }
        }
        return out;
    }

    @Test
    @Timeout(120)
    void aReleaseHeldUpBehindASlowListenerReturnsAndIsRecordedOnceDelivered() throws Exception {
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build()) {
            AccountingSampler s = AccountingSampler.open(AccountingStore.at(dir), AccountingSettings.defaults()
                    .withCheckpoint(Duration.ofSeconds(1)), node.inventory(), null,
                    new HostIdleEffects(node.scheduler()), Clock.systemUTC()).orElseThrow();
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch goOn = new CountDownLatch(1);
            // a listener that takes its time over carol's grant (a slow disk, a busy console)
            node.scheduler().addListener(e -> {
                if (e.type() == AllocationEvent.Type.ALLOCATED && e.owner().equals(Optional.of("carol"))) {
                    inside.countDown();
                    try {
                        goOn.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException ie) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            node.scheduler().addListener(s);
            Allocation bob = node.scheduler().allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=bob"));
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread carol = new Thread(() -> {
                try {
                    node.scheduler().allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=carol"));
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            try {
                carol.start();
                assertThat(inside.await(60, TimeUnit.SECONDS)).as("carol's grant reached the listeners").isTrue();
                // returns while carol's grant is still being delivered: it does not wait for another's listener
                assertThat(node.scheduler().release(bob.id())).isTrue();
            } finally {
                goOn.countDown();
                carol.join();
            }
            assertThat(failed.get()).isNull();
            // once delivery caught up, bob's allocation ended with exactly one record
            assertThat(ends(JournalLines.all(dir.resolve(AccountingStore.DIR)), bob.id()))
                    .as("records ending bob's allocation once delivery caught up").hasSize(1);
            s.close();
        }
    }
}
