package io.gpusched.accounting.adversarial.review23;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
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
 * A simulated node (GPUs 0 and 1: whole A100s with energy counters), a scheduler and the accounting sampler on one
 * manual clock, from the module's public API only (review23's copy of the adversarial tests' node).
 */
final class Review23Node implements AutoCloseable {
    static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");

    final ManualClock clock = new ManualClock(T0);
    final SimulatedGpuInventory inventory;
    final GpuScheduler scheduler;
    final AccountingStore store;
    final AccountingSampler sampler;
    /** pid to allocation id: whom the host's attribution says a listed process works for */
    final Map<Integer, String> pids = new ConcurrentHashMap<>();

    Review23Node(Path stateDir, AccountingSettings settings) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review23").clock(clock).energyCounters(true);
        for (int i = 0; i < 2; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-review23-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        inventory = b.build();
        scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        store = AccountingStore.at(stateDir);
        ProcessAttribution byPid = (device, pid, holders) -> Optional.ofNullable(pids.get(pid))
                .map(UsageOwner::allocation);
        sampler = AccountingSampler.open(store, settings, inventory, byPid, new HostIdleEffects(scheduler), clock)
                .orElseThrow();
        scheduler.addListener(sampler);
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
