package io.gpusched.accounting;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.UsageOwner;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.core.sim.UsageTrace;
import io.gpusched.testing.ManualClock;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A simulated node with scripted traces, a scheduler and a sampler on one manual clock, for tests that check a
 * report's figures against what the script implies. GPUs: 0 and 1 whole A100s with energy counters, 2 a MIG
 * partition, 3 a GPU without an energy counter.
 */
final class ScriptedNode implements AutoCloseable {
    static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");

    final ManualClock clock = new ManualClock(T0);
    final SimulatedGpuInventory inventory;
    final GpuScheduler scheduler;
    final AccountingStore store;
    final AccountingSampler sampler;
    /** pid to allocation id: the test's attribution of scripted processes */
    final Map<Integer, String> pids = new ConcurrentHashMap<>();
    /** pid to its process's start time (its incarnation); a pid not here: the attribution cannot tell */
    final Map<Integer, Long> starts = new ConcurrentHashMap<>();
    /** how many times the attribution was asked about each pid */
    final Map<Integer, Integer> asked = new ConcurrentHashMap<>();
    final List<IdleNotice> notices = new ArrayList<>();

    ScriptedNode(Path stateDir, AccountingSettings settings) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("scripted").clock(clock)
                .energyCounters(true).energyCounter(3, false);
        for (int i = 0; i < 4; i++) {
            GpuDevice.Builder d = GpuDevice.builder().index(i).uuid("GPU-scripted-" + i).vendor(GpuVendor.NVIDIA)
                    .name(i == 2 ? "NVIDIA A100 MIG 3g.20gb" : "NVIDIA A100-SXM4-40GB")
                    .memory(MemorySize.ofGibibytes(i == 2 ? 20 : 40)).pciBusId("00000000:0" + i + ":00.0");
            if (i == 2) {
                d.parentUuid("GPU-scripted-parent");
            }
            b.device(d.build());
        }
        inventory = b.build();
        scheduler = GpuScheduler.builder().inventory(inventory).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        store = AccountingStore.at(stateDir);
        ProcessAttribution byPid = new ProcessAttribution() {
            @Override
            public Optional<UsageOwner> ownerOf(GpuDevice device, int pid, List<Allocation> holders) {
                asked.merge(pid, 1, Integer::sum);
                return Optional.ofNullable(pids.get(pid)).map(UsageOwner::allocation);
            }

            @Override
            public OptionalLong incarnation(int pid) {
                Long t = starts.get(pid);
                return t == null ? OptionalLong.empty() : OptionalLong.of(t);
            }
        };
        HostIdleEffects effects = new HostIdleEffects(scheduler).listener(notices::add);
        sampler = AccountingSampler.open(store, settings, inventory, byPid, effects, clock).orElseThrow();
        scheduler.addListener(sampler);
    }

    Allocation allocate(GpuRequest r) {
        return scheduler.allocate(r);
    }

    /** Sweeps now (as the console's tick does). */
    List<AccountingRecord.IdleAction> sweep() {
        return sampler.sweep(inventory.sample(), scheduler.allocations());
    }

    /** Advances the clock by {@code step} and sweeps, {@code n} times. */
    void run(Duration step, int n) {
        for (int i = 0; i < n; i++) {
            clock.advance(step);
            sweep();
        }
    }

    void trace(int gpu, UsageTrace t) {
        inventory.setTrace(gpu, t);
    }

    static UsageTrace trace(Duration step, List<Double> util, List<MemorySize> mem, List<Double> power) {
        return new UsageTrace(step, util, mem, power);
    }

    static List<AllocationEvent> none() {
        return List.of();
    }

    @Override
    public void close() {
        sampler.close();
        scheduler.close();
        inventory.close();
    }
}
