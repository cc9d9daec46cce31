package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: the package's units (deploy/systemd) stop their command with SIGTERM ({@code systemctl stop}, an
 * upgrade's try-restart; gpusched.service: "SIGTERM to the service alone: it ends each job ..."). Both commands then
 * exit with status 143 (the JVM's 128+15 after its shutdown hooks), which systemd counts as a failure unless the unit
 * says {@code SuccessExitStatus=143}: neither unit does, so every {@code systemctl stop gpusched} (and
 * {@code gpusched-k8s-device-plugin}) leaves the unit "failed (Result: exit-code)", status=143, for monitoring to page
 * about, after an orderly stop. 143 is in no row of README's exit-code table either. Each test starts the command as
 * its unit does, stops it with SIGTERM once it serves, and takes its exit status with the unit's SuccessExitStatus.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class StoppedBySystemdTest {
    static final Path DEPLOY = Path.of("..", "deploy", "systemd").toAbsolutePath().normalize();

    @TempDir
    Path dir;

    /** @return the exit statuses systemd counts as success for the unit: 0 and its SuccessExitStatus= numbers */
    private static Set<Integer> successStatuses(String unit) throws Exception {
        Set<Integer> ok = new TreeSet<>(Set.of(0));
        for (String line : Files.readAllLines(DEPLOY.resolve(unit))) {
            String l = line.strip();
            if (l.startsWith("SuccessExitStatus=")) {
                for (String w : l.substring("SuccessExitStatus=".length()).split("\\s+")) {
                    if (w.matches("[0-9]{1,3}")) {
                        ok.add(Integer.parseInt(w));
                    }
                }
            }
        }
        return ok;
    }

    /** Starts {@code args} as a child JVM, waits for {@code ready} in its output, sends SIGTERM, @return its status */
    private int stopBySigterm(String ready, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-cp",
                System.getProperty("java.class.path"), GpuschedCommand.class.getName()));
        cmd.addAll(List.of(args));
        Path log = dir.resolve("out.log");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().remove("GPUSCHED_SOCKET");
        Process p = pb.start();
        try {
            for (int i = 0; i < 900 && p.isAlive() && !Files.readString(log).contains(ready); i++) {
                Thread.sleep(100);
            }
            assertThat(Files.readString(log)).as("the command serves").contains(ready);
            p.destroy(); // SIGTERM, as systemctl stop sends it (KillSignal's default)
            assertThat(p.waitFor(90, TimeUnit.SECONDS)).as("it ends on SIGTERM: " + Files.readString(log)).isTrue();
            return p.exitValue();
        } finally {
            if (p.isAlive()) {
                p.destroyForcibly().waitFor();
            }
        }
    }

    @Test
    void theDevicePluginStoppedBySystemdEndsAsASuccessOfItsUnit() throws Exception {
        Path unit = DEPLOY.resolve("gpusched-k8s-device-plugin.service");
        assumeTrue(Files.isRegularFile(unit), "needs " + unit);
        int status = stopBySigterm("gpusched k8s-device-plugin: serving", "--simulate", "dgx1-v100", "--state-dir",
                dir.resolve("state").toString(), "k8s-device-plugin", "--device-plugin-dir",
                Files.createDirectories(dir.resolve("plugins")).toString());
        assertThat(successStatuses(unit.getFileName().toString())).as("gpusched k8s-device-plugin exited %d on"
                + " SIGTERM; the statuses %s counts as success", status, unit.getFileName()).contains(status);
    }

    @Test
    void theNodeServiceStoppedBySystemdEndsAsASuccessOfItsUnit() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root (the node service)");
        Path unit = DEPLOY.resolve("gpusched.service");
        assumeTrue(Files.isRegularFile(unit), "needs " + unit);
        Path base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-r16-");
        try {
            int status = stopBySigterm("gpusched node service on", "--simulate", "dgx1-v100", "--state-dir",
                    base.resolve("state").toString(), "serve", "--listen", "127.0.0.1:0", "--socket",
                    base.resolve("run").resolve("gpusched.sock").toString());
            assertThat(successStatuses(unit.getFileName().toString())).as("gpusched serve exited %d on SIGTERM; the"
                    + " statuses %s counts as success", status, unit.getFileName()).contains(status);
        } finally {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }
}
