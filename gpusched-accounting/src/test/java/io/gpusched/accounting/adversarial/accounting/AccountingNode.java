package io.gpusched.accounting.adversarial.accounting;

import io.gpusched.accounting.AccountingRecord.IdleAction;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdleNotice;
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
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
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
 * A simulated node with a scheduler and an accounting sampler on one manual clock, built from the module's public API
 * only: the adversarial accounting tests' one node (the reviews' packages use it too). GPUs 0 and 1: whole A100s with
 * energy counters; GPU 2: a whole A100 without one (its energy estimated from power).
 */
public final class AccountingNode implements AutoCloseable {
    public static final Instant T0 = Instant.parse("2026-03-02T10:00:00Z");

    public final ManualClock clock = new ManualClock(T0);
    public final SimulatedGpuInventory inventory;
    public final GpuScheduler scheduler;
    public final AccountingStore store;
    public final AccountingSettings settings;
    /** pid to allocation id: whom the default attribution says a listed process works for */
    public final Map<Integer, String> pids = new ConcurrentHashMap<>();
    /** the node's attribution: by {@link #pids} unless the test gave its own */
    public final ProcessAttribution attribution;
    /** the idle policy's notices to holders */
    public final List<IdleNotice> notices = new ArrayList<>();
    public AccountingSampler sampler;

    public AccountingNode(Path stateDir, AccountingSettings settings) {
        this(stateDir, settings, null);
    }

    /** @param attribution the node's attribution; null: by {@link #pids} */
    public AccountingNode(Path stateDir, AccountingSettings settings, ProcessAttribution attribution) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("review").clock(clock).energyCounters(true)
                .energyCounter(2, false);
        for (int i = 0; i < 3; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-review-" + i).vendor(GpuVendor.NVIDIA)
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
        startSampler();
    }

    /** Opens a (new) sampler over the store, as a started or restarted console or service does. */
    public void startSampler() {
        HostIdleEffects effects = new HostIdleEffects(scheduler).listener(notices::add);
        sampler = AccountingSampler.open(store, settings, inventory, attribution, effects, clock).orElseThrow();
        scheduler.addListener(sampler);
        sampler.knownLive(scheduler.allocations()); // as the console and `gpusched run` do when they start theirs
    }

    /** Stops the sampler (a planned stop: its last checkpoint is written); none runs until the next start. */
    public void stopSampler() {
        scheduler.removeListener(sampler);
        sampler.close();
    }

    /** Stops the sampler and starts another one. */
    public void restartSampler() {
        stopSampler();
        startSampler();
    }

    public List<IdleAction> sweep() {
        return sampler.sweep(inventory.sample(), scheduler.allocations());
    }

    /** Sweeps now with the metrics of one device changed. */
    public List<IdleAction> sweepWith(int index, UnaryOperator<GpuMetrics> change) {
        GpuSample s = inventory.sample();
        List<GpuMetrics> ms = new ArrayList<>();
        for (GpuMetrics m : s.metrics()) {
            ms.add(m.index() == index ? change.apply(m) : m);
        }
        return sampler.sweep(new GpuSample(s.takenAt(), ms), scheduler.allocations());
    }

    /** Advances the clock by {@code step} and sweeps, {@code n} times. @return the idle policy's steps */
    public List<IdleAction> run(Duration step, int n) {
        List<IdleAction> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            clock.advance(step);
            out.addAll(sweep());
        }
        return out;
    }

    /**
     * What a {@code kill -9} of the sampler leaves: its journals and summaries as its last write left them, copied to
     * {@code stateDir} (the sampler goes on holding its own store's lock, as a killed process's lock would be gone).
     *
     * @return the store over the copy, for the next sampler
     */
    public AccountingStore killedCopy(Path stateDir) {
        Path to = stateDir.resolve(AccountingStore.DIR);
        try {
            Files.createDirectories(to);
            // what a kill leaves: the journals, the summaries and the sweep mark (the page cache keeps it)
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(sampler.store().directory(),
                    "*.{log,sum,mark}")) {
                for (Path f : ds) {
                    Files.copy(f, to.resolve(f.getFileName()));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return AccountingStore.at(stateDir);
    }

    @Override
    public void close() {
        sampler.close();
        scheduler.close();
        inventory.close();
    }
}
