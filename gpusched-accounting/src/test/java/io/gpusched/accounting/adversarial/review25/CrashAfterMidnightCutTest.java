package io.gpusched.accounting.adversarial.review25;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * "A crash loses at most one interval and never counts twice" (issue 34). A sweep that crosses UTC midnight writes the
 * part before midnight at once (UsageMeter.credit: {@code close(tr, midnight)}), with the energy of the sweep's span
 * before midnight, but with {@code counterAtEnd} = the counter at the previous sweep (the track's counters are updated
 * only after crediting). The node crashes before the next checkpoint: the store's tail is that cut interval. The next
 * sampler bridges the gap from midnight with the counter's delta from that older reading, so the energy drawn between
 * the last sweep before midnight and midnight is counted twice: once in the cut interval, once in the gap, both
 * "exact". The crash is modelled by a copy of the store taken right after the midnight sweep, on which a new sampler
 * (same scheduler and GPUs) continues, as one started after a crash would.
 */
@Tag("adversarial")
class CrashAfterMidnightCutTest {
    @TempDir
    Path dir;

    private static void copyJournals(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(from, "*.{log,sum}")) {
            for (Path p : ds) {
                Files.copy(p, to.resolve(p.getFileName()));
            }
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void energyBeforeMidnightIsNotCountedAgainAfterACrashRightAfterTheMidnightSweep() throws IOException {
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofMinutes(5));
        try (AccountingNode node = new AccountingNode(dir.resolve("node"), settings)) {
            node.inventory.setTrace(0, new UsageTrace(Duration.ofSeconds(10), List.of(60.0), List.of(),
                    List.of(300.0)));
            node.clock.set(Instant.parse("2026-03-02T23:58:00Z"));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            long atGrant = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();
            node.run(Duration.ofSeconds(10), 11); // to 23:59:50
            node.clock.set(Instant.parse("2026-03-03T00:00:05Z"));
            node.sweep(); // crosses midnight: the part before it is written now
            // the node crashes here: what is on disk is all the next sampler has
            Path crashed = dir.resolve("crashed");
            copyJournals(node.store.directory(), crashed.resolve(AccountingStore.DIR));
            node.scheduler.removeListener(node.sampler);
            AccountingStore store = AccountingStore.at(crashed);
            try (AccountingSampler next = AccountingSampler.open(store, settings, node.inventory, node.attribution,
                    new HostIdleEffects(node.scheduler), node.clock).orElseThrow()) {
                node.scheduler.addListener(next);
                for (int i = 0; i < 6; i++) {
                    node.clock.advance(Duration.ofSeconds(10));
                    next.sweep(node.inventory.sample(), node.scheduler.allocations());
                }
                node.scheduler.release(a.id()); // at the last sweep
                long atRelease = node.inventory.sample().forDevice(0).orElseThrow().energyMillijoules()
                        .getAsLong();

                AllocationUsage u = AllocationUsage.find(store, a.id()).orElseThrow();
                long drawn = atRelease - atGrant; // the counter's delta over alice's allocation
                assertThat(u.total().energyMillijoules()).as("energy recorded for alice, mJ; the GPU's counter moved"
                        + " %d mJ from her grant to her release (%s)", drawn, u.verdict())
                        .isLessThanOrEqualTo(drawn + 1_000);
            }
        }
    }
}
