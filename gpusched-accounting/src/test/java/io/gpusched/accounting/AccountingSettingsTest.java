package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuConfigException;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@code gpu.accounting.*} as a gpusched.yaml gives it: the defaults, each key, and a refusal naming the key. */
class AccountingSettingsTest {

    @Test
    void defaultsWriteNoJobMapping() {
        AccountingSettings s = AccountingSettings.parse("gpu: {}\n", "gpusched.yaml");
        assertThat(s).isEqualTo(AccountingSettings.defaults());
        assertThat(s.hpcJobMappingDir()).isEmpty();
    }

    @Test
    void jobMappingDirectoryAndTheOtherKeys() {
        AccountingSettings s = AccountingSettings.parse("""
                gpu:
                  accounting:
                    checkpoint: 30s
                    hpc_job_mapping_dir: /run/gpusched/hpc-jobs
                """, "gpusched.yaml");
        assertThat(s.hpcJobMappingDir()).hasValue(Path.of("/run/gpusched/hpc-jobs"));
        assertThat(s.checkpoint()).isEqualTo(Duration.ofSeconds(30));
        assertThat(s.withCheckpoint(Duration.ofSeconds(60)).hpcJobMappingDir()).hasValue(
                Path.of("/run/gpusched/hpc-jobs"));
    }

    @Test
    void relativeJobMappingDirectoryIsRefusedNamingTheKey() {
        assertThatThrownBy(() -> AccountingSettings.parse("gpu:\n  accounting:\n    hpc_job_mapping_dir: jobs\n",
                "gpusched.yaml")).isInstanceOf(GpuConfigException.class).hasMessageContaining("gpusched.yaml")
                .hasMessageContaining("gpu.accounting.hpc_job_mapping_dir must be an absolute path");
        assertThatThrownBy(() -> AccountingSettings.parse("gpu:\n  accounting:\n    hpc_job_dir: /x\n",
                "gpusched.yaml")).isInstanceOf(GpuConfigException.class).hasMessageContaining("hpc_job_dir");
    }

    @Test
    void attributionListsSourcesAndRefusesOthersNamingTheValidOnes() {
        AccountingSettings s = AccountingSettings.parse("gpu:\n  accounting:\n    attribution: [slurm, kubernetes]\n",
                "gpusched.yaml");
        assertThat(s.attribution()).containsExactly("slurm", "kubernetes");
        assertThat(AccountingSettings.defaults().attribution()).isEmpty();
        assertThatThrownBy(() -> AccountingSettings.parse("gpu:\n  accounting:\n    attribution: [lsf]\n",
                "gpusched.yaml")).isInstanceOf(GpuConfigException.class).hasMessageContaining("gpusched.yaml")
                .hasMessageContaining("gpu.accounting.attribution lists \"lsf\"; valid: slurm, kubernetes");
        assertThatThrownBy(() -> AccountingSettings.parse("gpu:\n  accounting:\n    attribution: [slurm, slurm]\n",
                "gpusched.yaml")).isInstanceOf(GpuConfigException.class).hasMessageContaining("twice");
    }
}
