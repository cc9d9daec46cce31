package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched serve --config} with {@code gpu.accounting.attribution}: a source it does not know stops the start
 * with an error naming the setting and the valid ones; the two it knows are taken (the start goes on to the listen,
 * made to fail here on a taken port, so nothing keeps running).
 */
class ServeAttributionTest {
    @Test
    void anUnknownSourceIsRefusedNamingTheSettingAndTheKnownOnesAreTaken(@TempDir Path state) throws Exception {
        Path bad = Files.writeString(state.resolve("bad.yaml"), "gpu:\n  accounting:\n    attribution: [lsf]\n");
        Cli.Result r = Cli.run(state, "--simulate", "pcie-4xa10", "--config", bad.toString(), "serve", "--listen",
                "127.0.0.1:0");
        assertThat(r.exit()).as(r.err()).isNotZero();
        assertThat(r.err()).contains("gpu.accounting.attribution lists \"lsf\"; valid: slurm, kubernetes");
        assertThat(r.out()).doesNotContain("gpusched console on");

        Path good = Files.writeString(state.resolve("good.yaml"),
                "gpu:\n  accounting:\n    attribution: [slurm, kubernetes]\n");
        try (ServerSocket taken = new ServerSocket()) {
            taken.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            Cli.Result ok = Cli.run(state, "--simulate", "pcie-4xa10", "--config", good.toString(), "serve",
                    "--listen", "127.0.0.1:" + taken.getLocalPort());
            assertThat(ok.err()).as("the settings taken, the start fails only at the listen").contains(
                    "cannot listen").doesNotContain("attribution");
        }
    }
}
