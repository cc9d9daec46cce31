package io.gpusched.cli;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.accounting.IdlePolicy;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ProcessAttribution;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code gpusched run} as the node's accounting sampler while its job runs, when no other process is (no console or
 * service on the node): one sweep a second of every allocation of the node, its own job's included, into the store.
 * It never acts on the idle policy (flags only): releasing or signalling is the console's and the service's. When
 * another process holds the sampler lock, or the store cannot be opened, it samples nothing and says so at debug level;
 * settings it cannot take are refused before the job starts ({@code GpuConfigException}).
 */
public final class RunSampler implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RunSampler.class);

    private final Node node;
    private final AccountingSampler sampler;
    private final Thread thread;

    private RunSampler(Node node, AccountingSampler sampler) {
        this.node = node;
        this.sampler = sampler;
        this.thread = new Thread(this::loop, "gpusched-run-sampler");
        thread.setDaemon(true);
    }

    /**
     * @param node       the open node
     * @param configFile {@code --config}, for {@code gpu.accounting} and {@code gpu.idle.threshold}
     * @return a running sampler, or one that does nothing
     * @throws io.gpusched.core.GpuConfigException a setting of {@code gpu.accounting} it cannot read, naming it
     */
    public static RunSampler start(Node node, Optional<Path> configFile) {
        // the settings are the admin's: one refused is an error before the job starts, as serve's is (review65: a
        // typo in gpu.accounting.attribution made run meter nothing and say nothing)
        AccountingSettings s = configFile.map(AccountingSettings::load).orElse(AccountingSettings.defaults());
        if (!s.enabled()) {
            return new RunSampler(node, null);
        }
        IdlePolicy p = s.idle();
        AccountingSettings flagOnly = s.withIdle(new IdlePolicy(p.threshold(), p.window(), p.warnAfter(),
                p.actAfter(), IdlePolicy.Action.NONE, p.signal(), p.grace(), p.exemptOwners(), p.dryRun(),
                List.of()));
        // the node's store where the service keeps it: gpu.service.private_dir when the state directory is
        // shared (review61: a run beside the service became a second sampler of a store nothing reads)
        GpuConfig config = configFile.map(GpuConfig::load).orElse(GpuConfig.defaults());
        Path storeDir = config.service().privateDir(node.stateDirectory());
        try {
            // the sources' names were checked with the settings; one that cannot work for this user (gRPC over Unix
            // sockets not loadable here) is no reason to refuse the job: run then samples nothing, as beside the
            // service, which samples the node (review66)
            ProcessAttribution attribution = AttributionChain.of(s);
            Optional<AccountingSampler> opened = AccountingSampler.open(AccountingStore.at(storeDir),
                    flagOnly, node.inventory(), attribution, new HostIdleEffects(node.scheduler()),
                    Clock.systemUTC());
            if (opened.isEmpty()) {
                return new RunSampler(node, null);
            }
            node.scheduler().addListener(opened.get());
            opened.get().knownLive(node.scheduler().allocations());
            RunSampler r = new RunSampler(node, opened.get());
            r.thread.start();
            return r;
        } catch (RuntimeException e) {
            // a store this user cannot open (the service's, root's): another process samples, or none can
            LOG.debug("gpusched run samples nothing: {}", e.toString());
            return new RunSampler(node, null);
        }
    }

    private void loop() {
        while (!Thread.currentThread().isInterrupted()) {
            sweep();
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private void sweep() {
        try {
            node.scheduler().refresh();
            sampler.sweep(node.inventory().sample(), node.scheduler().allocations());
        } catch (RuntimeException e) {
            LOG.debug("accounting sweep failed: {}", e.toString());
        }
    }

    /** @return whether this run is the node's sampler */
    public boolean sampling() {
        return sampler != null;
    }

    /** Stops sampling: a last checkpoint (allocations still live stay open for the next sampler), the lock released. */
    @Override
    public void close() {
        if (sampler == null) {
            return;
        }
        thread.interrupt();
        try {
            thread.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        node.scheduler().removeListener(sampler);
        sampler.close();
    }
}
