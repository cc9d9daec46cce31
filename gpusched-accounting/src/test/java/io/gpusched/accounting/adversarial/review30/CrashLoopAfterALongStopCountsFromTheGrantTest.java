package io.gpusched.accounting.adversarial.review30;

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
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * "Never counts twice" across a crash. AccountingStore.recover reads back to the newest day with a checkpoint marker
 * and the file before it. Before fix28 a restarted sampler's first sweep (a checkpoint) wrote the restart's gap, so the
 * allocation had an interval beside that marker. fix28 holds a gap over 10 minutes back, and the first sweep's
 * checkpoint writes nothing for the allocation (UsageMeter.checkpoint: {@code covered == from}): only the marker. The
 * console, stopped over a weekend (2 days), crashes within its first checkpoint interval after the start (a crash
 * loop under systemd); the next sampler's recover finds the marker on today's file, reads today's and the file before
 * it (Sunday's, made by the first sweep for bob, granted on Sunday while no sampler ran), and does not find alice's
 * tail (Saturday's). Her allocation is then "new" (UsageMeter.start: no tail, so from its
 * grant, first) and the gap from her grant is written again: her first 30 minutes, already on record, are counted
 * twice, and her record has two grants.
 */
@Tag("adversarial")
class CrashLoopAfterALongStopCountsFromTheGrantTest {
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
    void aCrashRightAfterAStartThatFollowedALongStopDoesNotRecordTheAllocationAgainFromItsGrant()
            throws IOException {
        AccountingSettings settings = AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(60));
        try (AccountingNode node = new AccountingNode(dir.resolve("node"), settings)) {
            node.inventory.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 80));
            node.sweep();
            Allocation a = node.scheduler.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").build());
            node.run(Duration.ofSeconds(10), 180); // 30 min on record
            node.stopSampler(); // a planned stop over the weekend
            node.clock.advance(Duration.ofDays(1));
            // bob is granted GPU 1 on Sunday, while no sampler runs (the CLI writes the node ledger)
            node.scheduler.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").build());
            node.clock.advance(Duration.ofDays(1));
            node.startSampler(); // its first sweep writes bob's gap from his grant, into Sunday's file
            node.run(Duration.ofSeconds(10), 1); // the first sweep (a checkpoint), then kill -9 within the minute
            Path crashed = dir.resolve("crashed");
            copyJournals(node.store.directory(), crashed.resolve(AccountingStore.DIR));
            node.scheduler.removeListener(node.sampler);
            AccountingStore store = AccountingStore.at(crashed);
            node.clock.advance(Duration.ofSeconds(20));
            try (AccountingSampler next = AccountingSampler.open(store, settings, node.inventory, node.attribution,
                    new HostIdleEffects(node.scheduler), node.clock).orElseThrow()) {
                node.scheduler.addListener(next);
                next.knownLive(node.scheduler.allocations());
                for (int i = 0; i < 12; i++) { // 2 min
                    node.clock.advance(Duration.ofSeconds(10));
                    next.sweep(node.inventory.sample(), node.scheduler.allocations());
                }
                node.scheduler.release(a.id()); // at the last sweep
                Instant released = node.clock.instant();

                AllocationUsage u = AllocationUsage.find(store, a.id()).orElseThrow();
                Duration ledger = Duration.between(a.createdAt(), released);
                assertThat(Duration.ofMillis(u.total().heldMillis())).as("GPU time recorded for alice's 1 GPU; the"
                        + " ledger says granted %s, released %s (%s); %s", a.createdAt(), released, ledger,
                        u.verdict()).isLessThanOrEqualTo(ledger.plusMinutes(1));
            }
        }
    }
}
