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
    void intervalDefaultsToTenSecondsAndIsReadAndKeptByTheWithers() {
        assertThat(AccountingSettings.defaults().interval()).isEqualTo(Duration.ofSeconds(10));
        AccountingSettings s = AccountingSettings.parse("gpu:\n  accounting:\n    interval: 30s\n", "gpusched.yaml");
        assertThat(s.interval()).isEqualTo(Duration.ofSeconds(30));
        assertThat(s.withCheckpoint(Duration.ofMinutes(2)).withIdle(IdlePolicy.defaults())
                .withHpcJobMappingDir(Path.of("/run/x")).interval()).isEqualTo(Duration.ofSeconds(30));
    }

    @Test
    void intervalOutsideOneSecondToFiveMinutesIsRefusedNamingTheKey() {
        for (String bad : new String[]{"500ms", "0s", "301s", "1h"}) {
            assertThatThrownBy(() -> AccountingSettings.parse("gpu:\n  accounting:\n    interval: " + bad + "\n",
                    "gpusched.yaml")).as(bad).isInstanceOf(GpuConfigException.class)
                    .hasMessageContaining("gpusched.yaml").hasMessageContaining("gpu.accounting.interval must be 1s"
                            + " to 5m, was");
        }
        assertThat(AccountingSettings.parse("gpu:\n  accounting:\n    interval: 5m\n", "gpusched.yaml")
                .interval()).isEqualTo(Duration.ofMinutes(5));
    }
}
