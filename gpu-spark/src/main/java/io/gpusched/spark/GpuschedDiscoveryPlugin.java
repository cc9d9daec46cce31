package io.gpusched.spark;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import java.util.Optional;
import org.apache.spark.SparkConf;
import org.apache.spark.api.resource.ResourceDiscoveryPlugin;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;

/**
 * A Spark {@link ResourceDiscoveryPlugin} that draws GPUs from gpusched's node ledger for the JVM that asks (a driver
 * or an executor), so that several executors on one node get disjoint GPUs with no help from the cluster manager. The
 * allocation is bound to the JVM: it is released when the JVM exits, and reclaimed by the next process that touches
 * the ledger when the JVM is killed.
 *
 * <pre>
 * spark.resources.discoveryPlugin          io.gpusched.spark.GpuschedDiscoveryPlugin
 * spark.executor.resource.gpu.amount       2
 * spark.gpusched.stateDir                  /var/lib/gpusched
 * </pre>
 * Settings ({@code spark.gpusched.*}): see {@link SparkGpuSettings}. Resources other than
 * {@code spark.gpusched.resourceName} ({@code gpu}) are left to the next plugin (Spark's discovery script).
 * When the node cannot serve the request, discovery throws with gpusched's reason and Spark does not start.
 */
public class GpuschedDiscoveryPlugin implements ResourceDiscoveryPlugin {

    /** Used by Spark through reflection. */
    public GpuschedDiscoveryPlugin() {
    }

    /**
     * @return the GPUs given to this JVM, addressed by index (default) or UUID (none, and nothing held, for an amount
     *         of 0); empty for another resource
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
        String who = request.id().componentName() + " of " + conf.get("spark.app.name", "a Spark application");
        GpuRequest.Builder b = GpuRequest.builder().count((int) amount).holder(HolderProcess.current())
                .owner("spark").jobId(who);
        s.memoryPerGpu().ifPresent(b::minMemory);
        Allocation a;
        try {
            a = JvmGpus.allocate(request.id().componentName() + "/" + s.resourceName(), s, b.build());
        } catch (GpuAllocationException e) {
            throw new IllegalStateException("gpusched cannot give " + amount + " " + s.resourceName() + " to the "
                    + who + " (pid " + ProcessHandle.current().pid() + "): " + e.reason() + ": " + e.getMessage(), e);
        }
        String[] addresses = s.addressByUuid()
                ? a.deviceUuids().toArray(new String[0])
                : a.deviceIndices().stream().map(String::valueOf).toArray(String[]::new);
        return Optional.of(new ResourceInformation(s.resourceName(), addresses));
    }
}
