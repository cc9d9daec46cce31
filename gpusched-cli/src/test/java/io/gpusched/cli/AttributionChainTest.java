package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code gpu.accounting.attribution} turns the sampler's pass over pods' and Slurm jobs' GPUs on. */
class AttributionChainTest {
    @Test
    void onlyAListedSourceNamesOthers() {
        assertThat(AttributionChain.of(AccountingSettings.defaults()).namesOthers()).isFalse();
        assertThat(AttributionChain.of(AccountingSettings.defaults().withAttribution(List.of("slurm"))).namesOthers())
                .isTrue();
        assertThat(AttributionChain.of(AccountingSettings.defaults().withAttribution(List.of("kubernetes")))
                .namesOthers()).isTrue();
    }
}
