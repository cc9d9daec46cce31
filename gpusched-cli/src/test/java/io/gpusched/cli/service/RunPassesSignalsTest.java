package io.gpusched.cli.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.ForegroundSignals;
import io.gpusched.testing.LedgerReader;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched run} through the node service passes its own signals on to the job (a signal request; the job is
 * the service's child, not in the command's process group) and returns the job's exit code: SIGINT and SIGTERM sent to
 * the command's process reach the job's trap, which decides how it ends. The command runs in a child JVM (a real
 * process that gets real signals) against {@link ServiceStandIn}.
 */
@Timeout(120)
class RunPassesSignalsTest {
    @TempDir
    Path dir;
    ServiceStandIn service;

    @BeforeEach
    void setUp() throws Exception {
        service = new ServiceStandIn(dir, "pcie-4xa10");
    }

    @AfterEach
    void tearDown() throws Exception {
        service.close();
    }

    private Process run(String script) throws Exception {
        List<String> cmd = new ArrayList<>(ForegroundSignals.prefix()); // Ctrl-C not ignored, as in a shell
        cmd.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "run", "--gpu=1", "--", "sh", "-c", script));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("GPUSCHED_SOCKET", service.path().toString());
        return pb.start();
    }

    private static String awaitLine(BufferedReader r, String wanted, StringBuilder seen) throws Exception {
        String line;
        while ((line = r.readLine()) != null) {
            seen.append(line).append('\n');
            if (line.contains(wanted)) {
                return line;
            }
        }
        throw new AssertionError("no line with " + wanted + " in: " + seen);
    }

    private void passes(String signal, int code) throws Exception {
        Process p = run("trap 'echo got " + signal + "; exit " + code + "' " + signal + "; echo ready;"
                + " while :; do sleep 0.1; done");
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        awaitLine(r, "ready", seen);
        assertThat(new ProcessBuilder("kill", "-s", signal, Long.toString(p.pid())).start().waitFor()).isZero();
        awaitLine(r, "got " + signal, seen);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(seen.toString()).isEqualTo(code);
        // the stand-in releases when it sees the job's process end: up to 60 s on a loaded machine
        for (int i = 0; i < 600 && !LedgerReader.read(dir.resolve("service-state")).live.isEmpty(); i++) {
            Thread.sleep(100);
        }
        assertThat(LedgerReader.read(dir.resolve("service-state")).live).as("the job's GPUs released").isEmpty();
    }

    @Test
    void ctrlCReachesTheJobWhichDecidesItsExitCode() throws Exception {
        passes("INT", 42);
    }

    @Test
    void sigtermReachesTheJobToo() throws Exception {
        passes("TERM", 43);
    }
}
