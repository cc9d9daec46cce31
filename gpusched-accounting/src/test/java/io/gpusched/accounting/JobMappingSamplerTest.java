package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuRequest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sampler keeps dcgm-exporter's HPC job-mapping directory ({@code gpu.accounting.hpc_job_mapping_dir}) in step
 * with the node's allocations at each sweep, and refuses a directory it must not write.
 */
class JobMappingSamplerTest {
    @TempDir
    Path dir;

    private static AccountingSettings settings(Path jobs) {
        return AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(30)).withHpcJobMappingDir(jobs);
    }

    private static String[] names(Path jobs) throws Exception {
        try (Stream<Path> s = Files.list(jobs)) {
            return s.map(p -> p.getFileName().toString()).sorted().toArray(String[]::new);
        }
    }

    @Test
    void eachSweepWritesTheHeldGpusJobsAndRemovesReleasedOnes() throws Exception {
        Path jobs = dir.resolve("hpc-jobs");
        ScriptedNode node = new ScriptedNode(dir.resolve("state"), settings(jobs));
        try {
            node.sweep();
            assertThat(names(jobs)).as("nothing held: no file").isEmpty();
            Allocation a = node.allocate(GpuRequest.builder().requiredDevices(0).owner("alice").jobId("train")
                    .build());
            Allocation b =
                    node.allocate(GpuRequest.builder().requiredDevices(1).owner("bob").jobId("../etc/x").build());
            node.sweep();
            assertThat(names(jobs)).containsExactly("0", "1");
            assertThat(Files.readString(jobs.resolve("0"))).isEqualTo("train\n");
            assertThat(Files.readString(jobs.resolve("1")))
                    .as("a job id that is not a plain token (a path): the allocation id")
                    .isEqualTo(b.id() + "\n");
            node.scheduler.release(a.id());
            node.sweep();
            assertThat(names(jobs)).containsExactly("1");
        } finally {
            node.close();
        }
    }

    @Test
    void aSymlinkedDirectoryIsRefusedWhenTheSamplerOpens() throws Exception {
        Path real = Files.createDirectories(dir.resolve("real"));
        Path link = Files.createSymbolicLink(dir.resolve("link"), real);
        assertThatThrownBy(() -> new ScriptedNode(dir.resolve("state"), settings(link)))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining(link.toString());
    }
}
