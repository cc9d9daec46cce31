package io.gpusched.slurm;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventory;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * gres.conf of every built-in simulated node and the MIG and AMD captures, byte for byte against the files in
 * {@code src/test/resources/golden}. After a deliberate change: {@code -Dgpusched.golden.update=true} rewrites them
 * (then read the diff).
 */
class SlurmGoldenTest {
    static final CpuLayout TWO_SOCKETS = CpuLayout.uniform(2, 20);

    static String render(String node) {
        try (GpuInventory inv = TestNodes.open(node)) {
            return SlurmGres.of(inv, new SlurmGres.Options(Path.of("/dev"), TestNodes.proc(inv), TWO_SOCKETS))
                    .gresConf();
        }
    }

    @ParameterizedTest
    @MethodSource("io.gpusched.slurm.TestNodes#names")
    void gresConfMatchesGolden(String node) throws IOException {
        String text = render(node);
        assertThat(render(node)).as("same node, same bytes").isEqualTo(text);
        String file = node + ".gres.conf";
        if (Boolean.getBoolean("gpusched.golden.update")) {
            Path dir = Path.of("src/test/resources/golden");
            Files.createDirectories(dir);
            Files.writeString(dir.resolve(file), text);
        }
        try (InputStream in = SlurmGoldenTest.class.getResourceAsStream("/golden/" + file)) {
            assertThat(in).as("golden file " + file + " (create with -Dgpusched.golden.update=true)").isNotNull();
            assertThat(text).isEqualTo(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
        // what gpusched writes, its own --check reads back without a drift
        try (GpuInventory inv = TestNodes.open(node)) {
            SlurmGres g = SlurmGres.of(inv, new SlurmGres.Options(Path.of("/dev"), TestNodes.proc(inv), TWO_SOCKETS));
            assertThat(g.check(GresConfParser.parse(text, Optional.empty()))).isEmpty();
        }
    }
}
