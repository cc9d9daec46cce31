package io.gpusched.flink;

import org.apache.flink.api.common.externalresource.ExternalResourceDriver;
import org.apache.flink.api.common.externalresource.ExternalResourceDriverFactory;
import org.apache.flink.configuration.Configuration;

/**
 * Flink's entry point (listed in {@code META-INF/services}): makes a {@link GpuschedDriver} from the resource's
 * {@code external-resource.<name>.param.*} settings.
 * <pre>
 * external-resources: gpu
 * external-resource.gpu.amount: 2
 * external-resource.gpu.driver-factory.class: io.gpusched.flink.GpuschedDriverFactory
 * external-resource.gpu.param.state-dir: /var/lib/gpusched
 * </pre>
 */
public class GpuschedDriverFactory implements ExternalResourceDriverFactory {

    /** Used by Flink through the service loader. */
    public GpuschedDriverFactory() {
    }

    /**
     * @param config the resource's parameters (Flink strips {@code external-resource.<name>.param.})
     * @throws IllegalArgumentException for a bad setting, naming it and what would be valid
     */
    @Override
    public ExternalResourceDriver createExternalResourceDriver(Configuration config) {
        return new GpuschedDriver(FlinkGpuSettings.from(config));
    }
}
