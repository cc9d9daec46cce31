package io.gpusched.accounting.adversarial.review33;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/ACCOUNTING.md, "Not sampled": an allocation "granted while no sampler ran and still live, or released after
 * the sampler started listening" is recorded, with its held time, when the sampler starts. Every host starts its
 * sampler the same way (ConsoleServer.openSampler, RunSampler, DemoUsage): {@code scheduler.addListener(sampler)},
 * then {@code sampler.knownLive(scheduler.allocations())}. The list is read before {@code knownLive} takes the
 * sampler's lock; a release on another thread in between reaches the listener first: UsageMeter.end records nothing
 * (not tracked, no tail in the store) but remembers the id as ended, there is no grant yet to record it from
 * (AccountingSampler: {@code grant == null}), and then {@code knownLive}, given the list that still shows it, skips
 * it because the meter now "knows" it ({@code meter.knows}: ended, fix30). Bob's 20 minutes on GPU 1 have no record
 * at all, though he released after the sampler began to listen.
 */
@Tag("adversarial")
class ReleasedBeforeKnownLiveHasNoRecordTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void anAllocationReleasedWhileTheStartingSamplerReadsTheLiveListIsRecorded() {
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(30)))) {
            node.inventory.setTrace(1, UsageTrace.of(Duration.ofSeconds(10), 70));
            node.sweep();
            node.stopSampler(); // the console is down
            Allocation b = node.scheduler.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            node.clock.advance(Duration.ofMinutes(20));

            // the console starts its sampler, as ConsoleServer.openSampler does
            AccountingSampler s = AccountingSampler.open(node.store, node.settings, node.inventory,
                    node.attribution, new HostIdleEffects(node.scheduler), node.clock).orElseThrow();
            node.sampler = s;
            node.scheduler.addListener(s);
            List<Allocation> live = node.scheduler.allocations(); // the argument of knownLive, evaluated first
            node.scheduler.release(b.id()); // another thread: bob releases, the sampler hears it
            Instant released = node.clock.instant();
            s.knownLive(live);
            node.run(Duration.ofSeconds(1), 5);
            node.sampler.checkpoint();

            Optional<AllocationUsage> u = AllocationUsage.find(node.store, b.id());
            assertThat(u).as("bob's record (granted %s while no sampler ran, released %s after his console's"
                    + " sampler began to listen)", b.createdAt(), released).isPresent();
            assertThat(Duration.ofMillis(u.get().total().heldMillis())).as("bob's GPU time")
                    .isEqualTo(Duration.between(b.createdAt(), released));
        }
    }
}
