package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * kill -9 of the {@code gpusched run} JVM alone: its child must not keep running with a GPU that the ledger
 * reclaims and hands out again. Facts come from /proc, not from gpusched.
 */
@Tag("adversarial")
class RunKillAdversarialTest {

    @Test
    void killingTheRunProcessKillsItsChildBeforeTheGpuIsHandedOutAgain(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        Process run = Cli.start(state, "--simulate", "pcie-4xa10", "run", "--no-isolation", "--devices=0", "--",
                "sh", "-c", "echo CHILD=$$; exec sleep 600");
        long child = -1;
        BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line; (line = r.readLine()) != null;) {
            seen.append(line).append('\n');
            if (line.startsWith("CHILD=")) {
                child = Long.parseLong(line.substring(6).trim());
                break;
            }
        }
        assertThat(child).as(seen.toString()).isPositive();
        assertThat(Cli.running(child)).isTrue();
        try {
            // the GPU is held while the run lives
            assertThat(Cli.run(state, "--simulate", "pcie-4xa10", "allocate", "--devices=0").exit()).isNotZero();

            run.destroyForcibly(); // SIGKILL to the gpusched run JVM only
            assertThat(run.waitFor(30, TimeUnit.SECONDS)).isTrue();

            boolean got = false;
            for (int i = 0; i < 200 && !got; i++) {
                Cli.Result a = Cli.run(state, "--simulate", "pcie-4xa10", "allocate", "--devices=0");
                if (a.exit() == 0) {
                    got = true;
                    // handed out again: the child that held it must be gone by now
                    assertThat(Cli.running(child)).as("child %d still runs while GPU 0 was handed out again: %s",
                            child, a.out()).isFalse();
                } else {
                    Thread.sleep(50);
                }
            }
            assertThat(got).as("GPU 0 reclaimed after the holder died").isTrue();
        } finally {
            if (Cli.running(child)) {
                new ProcessBuilder("kill", "-9", Long.toString(child)).start().waitFor();
            }
            run.destroyForcibly();
        }
    }
}
