package io.gpusched.cli;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.host.AllocationAttribution;
import io.gpusched.kubernetes.PodResourcesAttribution;
import io.gpusched.slurm.SlurmJobAttribution;

/**
 * The accounting sampler's attribution as {@code gpu.accounting.attribution} names it: gpusched's own rule first,
 * then each source listed, in its order (the command has every module; the console server and the accounting
 * module depend on neither source).
 */
public final class AttributionChain {
    private AttributionChain() {
    }

    /**
     * @return gpusched's rule, then {@code slurm} and {@code kubernetes} as the settings list them
     * @throws GpuConfigException naming the setting, when a source it lists cannot work here (the kubernetes source
     *                            without gRPC over Unix sockets)
     */
    public static ProcessAttribution of(AccountingSettings settings) {
        ProcessAttribution chain = AllocationAttribution.host();
        for (String source : settings.attribution()) {
            try {
                chain = chain.orElse(switch (source) {
                    case "slurm" -> SlurmJobAttribution.host();
                    case "kubernetes" -> PodResourcesAttribution.host();
                    default -> throw new GpuConfigException("gpu.accounting.attribution: no source " + source
                            + "; valid: " + String.join(", ", AccountingSettings.ATTRIBUTION_SOURCES));
                });
            } catch (BackendUnavailableException e) {
                throw new GpuConfigException("gpu.accounting.attribution lists " + source + ", which cannot work"
                        + " here: " + e.getMessage(), e);
            }
        }
        return chain;
    }
}
