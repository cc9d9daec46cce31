package io.gpusched.spark;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.ProcessGpus;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkConf;
import org.apache.spark.api.resource.ResourceDiscoveryPlugin;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Spark {@link ResourceDiscoveryPlugin} that draws GPUs from gpusched's node ledger for the Spark component that
 * discovers them, bound to its JVM's process, so that the components of one node get disjoint GPUs.
 *
 * <p>Which component discovers depends on the cluster manager: on Spark standalone the <b>Worker</b> discovers
 * ({@code spark.worker.resource.gpu.amount}; the Master then hands addresses out of the Worker's set to executors,
 * which never call this plugin), on YARN and Kubernetes each <b>executor</b> discovers
 * ({@code spark.executor.resource.gpu.amount}), and a driver asking for GPUs ({@code spark.driver.resource.gpu.amount})
 * discovers its own.
 *
 * <p>What a holding is keyed by, per JVM (see {@link ProcessGpus}): the driver and the executor once per JVM (Spark
 * runs one active SparkContext per JVM, and an executor backend is a JVM of its own), so a component asking again gets
 * back what it holds; a Worker per Worker instance, because {@code local-cluster[N,...]} runs N Workers in one JVM
 * with one shared {@code SparkConf}: each Worker discovers in its own RPC environment's dispatcher thread (its
 * {@code onStart}), and that thread, which lives exactly as long as the Worker's RPC environment, names the holding.
 *
 * <p>Given back: a Worker's GPUs when its RPC environment has shut down (the dispatcher thread that discovered ended:
 * {@code local-cluster} stopping, a Worker process stopping) and at JVM exit; the driver's and an executor's when
 * the SparkContext or the executor stops, if {@link GpuschedSparkPlugin} is in {@code spark.plugins}, else at JVM
 * exit; a killed JVM's GPUs are reclaimed by the next process that uses the ledger.
 *
 * <pre>
 * spark.resources.discoveryPlugin          io.gpusched.spark.GpuschedDiscoveryPlugin
 * spark.plugins                            io.gpusched.spark.GpuschedSparkPlugin
 * spark.worker.resource.gpu.amount         4      (standalone; on YARN/Kubernetes: spark.executor.resource.gpu.amount)
 * </pre>
 * Settings ({@code spark.gpusched.*}): see {@link SparkGpuSettings}. Resources other than
 * {@code spark.gpusched.resourceName} ({@code gpu}) are left to the next plugin (Spark's discovery script).
 * When the node cannot serve the request, discovery throws with gpusched's reason and the component does not start.
 */
public class GpuschedDiscoveryPlugin implements ResourceDiscoveryPlugin {
    private static final Logger LOG = LoggerFactory.getLogger(GpuschedDiscoveryPlugin.class);
    /** Worker holdings whose discovering thread is watched. */
    private static final Set<String> WATCHED = ConcurrentHashMap.newKeySet();

    /** Used by Spark through reflection. */
    public GpuschedDiscoveryPlugin() {
    }

    /**
     * @return the GPUs given to the asking component, addressed by index (default) or UUID (none, and nothing held,
     *         for an amount of 0); empty for another resource
     * @throws IllegalStateException with gpusched's reason when the node cannot serve the request
     * @throws IllegalArgumentException for a bad {@code spark.gpusched.*} setting, naming it
     */
    @Override
    public Optional<ResourceInformation> discoverResource(ResourceRequest request, SparkConf conf) {
        SparkGpuSettings s = SparkGpuSettings.from(conf);
        if (!request.id().resourceName().equals(s.resourceName())) {
            return Optional.empty();
        }
        long amount = request.amount();
        if (amount < 0 || amount > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(request.id().amountConf() + " = " + amount
                    + "; gpusched hands out whole GPUs: expected a count from 0 to " + Integer.MAX_VALUE);
        }
        if (amount == 0) { // asked for none: hold nothing (the ledger is not touched), answer with no addresses
            return Optional.of(new ResourceInformation(s.resourceName(), new String[0]));
        }
        String component = request.id().componentName();
        boolean worker = component.equals(SparkKeys.WORKER);
        String key = SparkKeys.key(component, s.resourceName(), Thread.currentThread());
        String who = worker ? component + " (thread " + Thread.currentThread().getName() + ")"
                : component + " of " + conf.get("spark.app.name", "a Spark application");
        GpuRequest.Builder b = GpuRequest.builder().count((int) amount).holder(HolderProcess.current())
                // an application's name is its user's free text: bounded and printable, as a job id must be
                .owner("spark").jobId(GpuRequests.toIdentifier(who, GpuRequest.MAX_JOB_ID_LENGTH));
        s.memoryPerGpu().ifPresent(b::minMemory);
        Allocation a;
        try {
            a = ProcessGpus.acquire(key, s.node(), b.build());
        } catch (GpuAllocationException e) {
            throw new IllegalStateException("gpusched cannot give " + amount + " " + s.resourceName() + " to the "
                    + who + " (pid " + ProcessHandle.current().pid() + "): " + e.reason() + ": " + e.getMessage(), e);
        }
        if (worker) {
            watch(key, Thread.currentThread());
        }
        String[] addresses = s.addressByUuid()
                ? a.deviceUuids().toArray(new String[0])
                : a.deviceIndices().stream().map(String::valueOf).toArray(String[]::new);
        return Optional.of(new ResourceInformation(s.resourceName(), addresses));
    }

    /** Gives a Worker's GPUs back once the thread that discovered them (its RPC dispatcher) has ended. */
    private static void watch(String key, Thread discovering) {
        if (!WATCHED.add(key)) {
            return;
        }
        Thread w = new Thread(() -> {
            try {
                discovering.join();
                if (ProcessGpus.release(key)) {
                    LOG.info("gpusched: the Worker of {} stopped (its dispatcher thread ended); its GPUs are back",
                            key);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                WATCHED.remove(key);
            }
        }, "gpusched-worker-watch");
        w.setDaemon(true);
        w.start();
    }
}
