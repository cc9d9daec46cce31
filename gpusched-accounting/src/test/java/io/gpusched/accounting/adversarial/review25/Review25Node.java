package io.gpusched.accounting.adversarial.review25;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
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
import java.util.function.UnaryOperator;

/**
 * A simulated node, a scheduler and the accounting sampler on one manual clock, from the module's public API only
 * (review25's copy of the adversarial tests' node). GPUs 0 and 1: whole A100s with energy counters; GPU 2: a whole
 * GPU without an energy counter (energy estimated from power).
 */
final class Review25Node implements AutoCloseable {
    static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");

    final ManualClock clock = new ManualClock(T0);
    final SimulatedGpuInventory inventory;
    final GpuScheduler scheduler;
    final AccountingStore store;
    final AccountingSettings settings;
    final ProcessAttribution attribution;
    AccountingSampler sampler;
    /** pid to allocation id: whom the default attribution says a listed process works for */
    final Map<Integer, String> pids = new ConcurrentHashMap<>();

    Review25Node(Path stateDir, AccountingSettings settings) {
        this(stateDir, settings, null);
    }

    /** @param attribution the node's attribution; null: by {@link #pids} */
    Review25Node(Path stateDir, AccountingSettings settings, ProcessAttribution attribution) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review25").clock(clock).energyCounters(true)
                .energyCounter(2, false);
        for (int i = 0; i < 3; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-review25-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-40GB").memory(MemorySize.ofGibibytes(40))
                    .pciBusId("00000000:0" + i + ":00.0").build());
        }
        inventory = b.build();
        scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        store = AccountingStore.at(stateDir);
        this.settings = settings;
        this.attribution = attribution != null ? attribution : (device, pid, holders) -> Optional.ofNullable(
                pids.get(pid)).map(UsageOwner::allocation);
        sampler = openSampler();
    }

    private AccountingSampler openSampler() {
        AccountingSampler s = AccountingSampler.open(store, settings, inventory, attribution,
                new HostIdleEffects(scheduler), clock).orElseThrow();
        scheduler.addListener(s);
        s.knownLive(scheduler.allocations()); // as the console and `gpusched run` do when they start their sampler
        return s;
    }

    /** Stops the node's sampler (a planned stop: its last checkpoint written) and starts another one. */
    void restartSampler() {
        stopSampler();
        startSampler();
    }

    /** Stops the node's sampler (a planned stop: its last checkpoint written); no sampler runs until the next start. */
    void stopSampler() {
        scheduler.removeListener(sampler);
        sampler.close();
    }

    /** Starts the node's sampler (after {@link #stopSampler}): it continues from the store. */
    void startSampler() {
        sampler = openSampler();
    }

    List<IdleAction> sweep() {
        return sampler.sweep(inventory.sample(), scheduler.allocations());
    }

    /** Sweeps now with the metrics of one device changed. */
    List<IdleAction> sweepWith(int index, UnaryOperator<GpuMetrics> change) {
        GpuSample s = inventory.sample();
        List<GpuMetrics> ms = new ArrayList<>();
        for (GpuMetrics m : s.metrics()) {
            ms.add(m.index() == index ? change.apply(m) : m);
        }
        return sampler.sweep(new GpuSample(s.takenAt(), ms), scheduler.allocations());
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
