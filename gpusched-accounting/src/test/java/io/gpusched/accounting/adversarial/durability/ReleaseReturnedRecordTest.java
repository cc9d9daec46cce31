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
 * docs/ACCOUNTING.md: "a release that returned has its accounting record on disk". The sampler is a listener of the
 * node's scheduler, as {@code serve} wires it; since listeners get events in ticket order (Ledger.deliver), a
 * {@code release} whose turn to deliver has not come leaves its events to the thread that is delivering, and returns
 * before the sampler saw them. Here one thread is delivering a grant (another listener takes a moment over it, as a
 * listener that writes does) while bob releases: bob's {@code release} returned, and the store on disk (read with this
 * package's own parser) has no record that ends bob's allocation. A kill -9 now loses an acknowledged release's record.
 */
@Tag("adversarial")
class ReleaseReturnedRecordTest {
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
    void aReleaseThatReturnedHasItsRecordOnDisk() throws Exception {
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
            List<JsonNode> onDisk;
            try {
                carol.start();
                assertThat(inside.await(60, TimeUnit.SECONDS)).as("carol's grant reached the listeners").isTrue();
                assertThat(node.scheduler().release(bob.id())).isTrue();
                // bob's release returned: what is on disk now is what a kill -9 would leave
                onDisk = JournalLines.all(dir.resolve(AccountingStore.DIR));
            } finally {
                goOn.countDown();
                carol.join();
            }
            assertThat(failed.get()).isNull();
            // the checker is not vacuous: once delivery caught up, the record is there
            assertThat(ends(JournalLines.all(dir.resolve(AccountingStore.DIR)), bob.id()))
                    .as("records ending bob's allocation once delivery caught up").hasSize(1);
            s.close();
            List<JsonNode> ends = ends(onDisk, bob.id());
            assertThat(ends).as("records on disk ending bob's allocation %s when his release returned (%d records"
                    + " on disk)", bob.id(), onDisk.size()).hasSize(1);
        }
    }
}
