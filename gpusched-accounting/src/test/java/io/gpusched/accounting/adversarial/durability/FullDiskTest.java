package io.gpusched.accounting.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.testing.ManualClock;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A full disk under the store (a 64 KiB tmpfs, filled): sweeps go on, what the meter closed while the store refused
 * writes is kept and written once there is room again, so the allocation's record has no hole and counts nothing
 * twice. Needs root (mount).
 */
@Tag("adversarial")
class FullDiskTest {
    @TempDir
    Path dir;

    @Test
    void whatAFullDiskRefusedIsWrittenWhenThereIsRoomAgain() throws Exception {
        Path mnt = Files.createDirectories(dir.resolve("small"));
        Process m = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt.toString())
                .redirectErrorStream(true).start();
        assumeTrue(m.waitFor() == 0, "skipped: cannot mount a tmpfs here (needs root and mount rights)");
        try {
            ManualClock clock = new ManualClock(Instant.parse("2026-05-05T10:00:00Z"));
            SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
            inv.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 70));
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                    .maintenanceInterval(Duration.ZERO).build();
                 AccountingSampler sampler = AccountingSampler.open(AccountingStore.at(mnt), AccountingSettings
                         .defaults().withCheckpoint(Duration.ofSeconds(10)), inv, ProcessAttribution.none(),
                         new HostIdleEffects(s), clock).orElseThrow()) {
                s.addListener(sampler);
                Allocation a = s.allocate(GpuRequest.builder().requiredDevices(0).owner("ida").build());
                sampler.sweep(inv.sample(), s.allocations());
                for (int i = 0; i < 3; i++) {
                    clock.advance(Duration.ofSeconds(10));
                    sampler.sweep(inv.sample(), s.allocations());
                }
                Path filler = mnt.resolve("filler");
                fill(filler);
                int refused = 0;
                for (int i = 0; i < 40; i++) { // more than a page of slack in the journal
                    clock.advance(Duration.ofSeconds(10));
                    try {
                        sampler.sweep(inv.sample(), s.allocations());
                    } catch (RuntimeException e) {
                        refused++;
                    }
                }
                assertThat(refused).as("the store refused writes while the disk was full").isPositive();
                Files.delete(filler);
                clock.advance(Duration.ofSeconds(10));
                sampler.sweep(inv.sample(), s.allocations());
                s.release(a.id());
                AllocationUsage u = AllocationUsage.find(AccountingStore.at(mnt), a.id()).orElseThrow();
                assertThat(u.total().heldMillis()).as("grant to release, once").isEqualTo(440_000);
                assertThat(u.total().measuredMillis()).isEqualTo(440_000);
                assertThat(u.total().meanUtilization()).hasValue(70);
                assertThat(u.end()).contains("RELEASED");
            }
        } finally {
            new ProcessBuilder("umount", "-l", mnt.toString()).start().waitFor();
        }
    }

    /**
     * What the store refused is written by the next sweep, even one that closes nothing of its own (no checkpoint due):
     * it is not left in memory, where a crash would lose it, until the next checkpoint.
     */
    @Test
    void aSweepWithNothingOfItsOwnStillWritesWhatWasRefused() throws Exception {
        Path mnt = Files.createDirectories(dir.resolve("small"));
        Process m = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt.toString())
                .redirectErrorStream(true).start();
        assumeTrue(m.waitFor() == 0, "skipped: cannot mount a tmpfs here (needs root and mount rights)");
        try {
            ManualClock clock = new ManualClock(Instant.parse("2026-05-05T10:00:00Z"));
            SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
            inv.setTrace(0, UsageTrace.of(Duration.ofSeconds(10), 70));
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                    .maintenanceInterval(Duration.ZERO).build();
                 AccountingSampler sampler = AccountingSampler.open(AccountingStore.at(mnt), AccountingSettings
                         .defaults().withCheckpoint(Duration.ofSeconds(10)), inv, ProcessAttribution.none(),
                         new HostIdleEffects(s), clock).orElseThrow()) {
                s.addListener(sampler);
                Allocation a = s.allocate(GpuRequest.builder().requiredDevices(0).owner("ida").build());
                sampler.sweep(inv.sample(), s.allocations());
                Path filler = mnt.resolve("filler");
                fill(filler);
                int refused = 0;
                for (int i = 0; i < 40; i++) {
                    clock.advance(Duration.ofSeconds(10));
                    try {
                        sampler.sweep(inv.sample(), s.allocations());
                    } catch (RuntimeException e) {
                        refused++;
                    }
                }
                assertThat(refused).as("the store refused writes while the disk was full").isPositive();
                Files.delete(filler);
                clock.advance(Duration.ofSeconds(1)); // no checkpoint due: this sweep closes nothing of its own
                sampler.sweep(inv.sample(), s.allocations());
                AllocationUsage u = AllocationUsage.find(AccountingStore.at(mnt), a.id()).orElseThrow();
                assertThat(u.total().heldMillis()).as("every checkpoint up to the last, refused ones included")
                        .isEqualTo(400_000);
                s.release(a.id());
            }
        } finally {
            new ProcessBuilder("umount", "-l", mnt.toString()).start().waitFor();
        }
    }

    private static void fill(Path f) throws IOException {
        byte[] block = new byte[4096];
        try (OutputStream out = Files.newOutputStream(f)) {
            for (int i = 0; i < 64; i++) {
                out.write(block);
            }
        } catch (IOException full) {
            // the disk is full: what the test wants
        }
    }
}
