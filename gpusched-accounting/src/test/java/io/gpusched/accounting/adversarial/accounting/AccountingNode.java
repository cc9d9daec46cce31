package io.gpusched.accounting.adversarial.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdleNotice;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A simulated node (GPUs 0 and 1: whole A100s with energy counters) with a scheduler and an accounting sampler on one
 * manual clock, built from the module's public API only, for the adversarial accounting tests.
 */
final class AccountingNode implements AutoCloseable {
    static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");

    final ManualClock clock = new ManualClock(T0);
    final SimulatedGpuInventory inventory;
    final GpuScheduler scheduler;
    final AccountingStore store;
    final AccountingSettings settings;
    /** pid to allocation id: the test's attribution of scripted processes */
    final Map<Integer, String> pids = new ConcurrentHashMap<>();
    final List<IdleNotice> notices = new ArrayList<>();
    AccountingSampler sampler;

    AccountingNode(Path stateDir, AccountingSettings settings) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review").clock(clock).energyCounters(true);
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-review-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        inventory = b.build();
        scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        store = AccountingStore.at(stateDir);
        this.settings = settings;
        startSampler();
    }

    /** Opens a (new) sampler over the store, as a restarted console or service does. */
    void startSampler() {
        ProcessAttribution byPid = (device, pid, holders) -> Optional.ofNullable(pids.get(pid))
                .map(UsageOwner::allocation);
        HostIdleEffects effects = new HostIdleEffects(scheduler).listener(notices::add);
        sampler = AccountingSampler.open(store, settings, inventory, byPid, effects, clock).orElseThrow();
        scheduler.addListener(sampler);
    }

    /** Stops the sampler (a planned stop: its last checkpoint is written). */
    void stopSampler() {
        scheduler.removeListener(sampler);
        sampler.close();
    }

    List<IdleAction> sweep() {
        return sampler.sweep(inventory.sample(), scheduler.allocations());
    }

    List<IdleAction> run(Duration step, int n) {
        List<IdleAction> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            clock.advance(step);
            out.addAll(sweep());
        }
        return out;
    }

    @Override
    public void close() {
        sampler.close();
        scheduler.close();
        inventory.close();
    }
}
