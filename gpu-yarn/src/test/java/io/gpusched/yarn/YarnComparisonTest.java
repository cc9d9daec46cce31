package io.gpusched.yarn;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuTopology;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The side-by-side with Hadoop's NVIDIA plugin: same node, same corpus; gpusched must be optimal everywhere. */
class YarnComparisonTest {

    @Test
    void simulatedDgx1AndTheTopoTextAgreeLinkByLink() {
        TopoText t = TopoText.dgx1();
        GpuTopology g = GpuInventories.simulated("dgx1-v100").topology();
        assertThat(t.n).isEqualTo(8);
        for (int a = 0; a < 8; a++) {
            for (int b = 0; b < 8; b++) {
                if (a != b) {
                    assertThat(g.linkCount(a, b)).as("NVLinks %d-%d", a, b).isEqualTo(t.links[a][b]);
                }
            }
        }
    }

    @Test
    void gpuschedIsOptimalOnEveryOccupancyStateAndHadoopAlwaysAnswers() throws Exception {
        YarnComparison c = new YarnComparison();
        assertThat(c.corpus).hasSize(522);
        for (YarnComparison.Row r : c.quality(c.gpusched, c.gpuschedDevices)) {
            assertThat(r.invalid()).isZero();
            assertThat(r.optimal()).as("optimal sets for %d GPUs", r.count()).isEqualTo(r.cases());
        }
        for (YarnComparison.Row r : c.quality(c.hadoop, c.hadoopDevices)) {
            assertThat(r.invalid()).as("Hadoop's plugin answers validly for %d GPUs", r.count()).isZero();
        }
        String table = c.table();
        Files.createDirectories(Path.of("target"));
        Files.writeString(Path.of("target", "yarn-comparison.md"), table);
    }
}
