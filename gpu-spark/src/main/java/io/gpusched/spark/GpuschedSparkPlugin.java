package io.gpusched.spark;

import io.gpusched.core.host.ProcessGpus;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Spark plugin ({@code spark.plugins io.gpusched.spark.GpuschedSparkPlugin}) that gives back the GPUs
 * {@link GpuschedDiscoveryPlugin} drew for the driver when the SparkContext stops, and for an executor when it stops,
 * rather than only when the JVM exits (what matters for a driver JVM that outlives its SparkContext: a notebook, a
 * job server). Spark calls {@code shutdown()} from {@code SparkContext.stop()} after the scheduler has stopped (in
 * {@code local-cluster} mode, after the in-JVM Workers and their executors stopped) and from {@code Executor.stop()}.
 * Without it, the same GPUs stay with the JVM until it exits, and a new SparkContext in that JVM gets them back.
 */
public class GpuschedSparkPlugin implements SparkPlugin {
    private static final Logger LOG = LoggerFactory.getLogger(GpuschedSparkPlugin.class);

    /** Used by Spark through reflection. */
    public GpuschedSparkPlugin() {
    }

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public void shutdown() {
                releaseAll(SparkKeys.DRIVER);
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void shutdown() {
                releaseAll(SparkKeys.EXECUTOR);
            }
        };
    }

    /** Gives back every holding of {@code component} in this JVM. */
    static void releaseAll(String component) {
        for (String key : ProcessGpus.held().keySet()) {
            if (key.startsWith(SparkKeys.prefix(component)) && ProcessGpus.release(key)) {
                LOG.info("gpusched: {} stopped; its GPUs are back ({})", component, key);
            }
        }
    }
}
