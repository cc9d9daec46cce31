package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.ReleaseRecordChild;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The releases of one scheduler transaction reach the sampler together ({@code onEvents}): their records are written
 * with one append and one force, not one each, and the call returns only once all of them are in the store. Told by
 * what the store holds when its interval listener (called after each append) hears of the first record: all three
 * records already, read back with this package's own parser.
 */
@Tag("adversarial")
class TransactionReleaseRecordsTest {

    @TempDir
    Path dir;

    @Test
    @Timeout(60)
    void theReleasesOfOneTransactionShareOneAppendAndAreOnDiskWhenItReturns() throws Exception {
        try (GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             AccountingSampler s = AccountingSampler.open(AccountingStore.at(dir), AccountingSettings.defaults(),
                     node.inventory(), null, new HostIdleEffects(node.scheduler()), Clock.systemUTC())
                     .orElseThrow()) {
            List<Set<String>> seenAtEachRecord = new ArrayList<>();
            s.addIntervalListener(iv -> {
                try {
                    seenAtEachRecord.add(ids());
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            Instant from = Instant.now().minusSeconds(10);
            List<AllocationEvent> releases = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                String uuid = node.inventory().devices().get(i).uuid();
                s.onEvent(ReleaseRecordChild.event(AllocationEvent.Type.ALLOCATED, from, "t" + i, uuid));
                releases.add(ReleaseRecordChild.event(AllocationEvent.Type.RELEASED, from.plusSeconds(5), "t" + i,
                        uuid));
            }
            s.onEvents(releases);
            assertThat(ids()).as("returned: every release's record is in the store").containsExactly("t0", "t1",
                    "t2");
            assertThat(seenAtEachRecord).isNotEmpty();
            assertThat(seenAtEachRecord.get(0)).as("what the store held after the first record's append: all three"
                    + " (one append for the transaction)").containsExactly("t0", "t1", "t2");
        }
    }

    private Set<String> ids() throws Exception {
        Set<String> out = new TreeSet<>();
        for (JsonNode n : JournalLines.all(dir.resolve(AccountingStore.DIR))) {
            if (JournalLines.interval(n)) {
                out.add(n.get("id").asText());
            }
        }
        return out;
    }
}
