package io.gpusched.cli.nodeservice;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.core.GpuConfig;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@code deploy/systemd/} ships for a shared node: the unit passes {@code systemd-analyze verify} with no
 * warning (its {@code ExecStart} pointed at a stand-in executable, since the test machine has no installed gpusched),
 * keeps {@code Delegate=yes}, and its command line is one the command parses; the example configuration loads.
 */
class DeployUnitTest {
    static final Path DEPLOY = Path.of("..", "deploy", "systemd").toAbsolutePath().normalize();

    @Test
    void theUnitVerifiesCleanlyAndDelegatesItsCgroupSubtree(@TempDir Path tmp) throws Exception {
        Path analyze = Path.of("/usr/bin/systemd-analyze");
        assumeTrue(Files.isExecutable(analyze), "skipped: systemd-analyze is missing (package systemd)");
        String unit = Files.readString(DEPLOY.resolve("gpusched.service"));
        assertThat(unit).contains("\nDelegate=yes\n").contains("\nKillMode=mixed\n").contains("\nUser=root\n");
        // accounting measures a restart's gap by the wall clock: the service starts after the clock is synchronized
        assertThat(unit).contains("\nAfter=time-sync.target\n");
        Path stand = tmp.resolve("gpusched");
        Files.writeString(stand, "#!/bin/sh\nexit 0\n");
        Files.setPosixFilePermissions(stand, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path copy = tmp.resolve("gpusched.service");
        Files.writeString(copy, unit.replace("/usr/bin/gpusched ", stand + " "));
        Process p = new ProcessBuilder(analyze.toString(), "verify", "--man=no", copy.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out.lines().filter(l -> l.contains("gpusched.service"))).as("no warning about the unit").isEmpty();
    }

    @Test
    void theDevicePluginUnitVerifiesCleanlyAndItsCommandLineParses(@TempDir Path tmp) throws Exception {
        Path analyze = Path.of("/usr/bin/systemd-analyze");
        String unit = Files.readString(DEPLOY.resolve("gpusched-k8s-device-plugin.service"));
        String exec = unit.lines().filter(l -> l.startsWith("ExecStart=")).findFirst().orElseThrow()
                .substring("ExecStart=/usr/bin/gpusched ".length());
        List<String> args = Arrays.asList(exec.split(" "));
        GpuschedCommand.commandLine(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8))
                .parseArgs(args.toArray(String[]::new));
        assertThat(args).contains("k8s-device-plugin");
        assumeTrue(Files.isExecutable(analyze), "skipped: systemd-analyze is missing (package systemd)");
        Path stand = tmp.resolve("gpusched");
        Files.writeString(stand, "#!/bin/sh\nexit 0\n");
        Files.setPosixFilePermissions(stand, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path copy = tmp.resolve("gpusched-k8s-device-plugin.service");
        Files.writeString(copy, unit.replace("/usr/bin/gpusched ", stand + " "));
        Process p = new ProcessBuilder(analyze.toString(), "verify", "--man=no", copy.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        assertThat(out.lines().filter(l -> l.contains("gpusched-k8s-device-plugin.service")))
                .as("no warning about the unit").isEmpty();
    }

    /**
     * The Debian package's conffile ({@code deploy/debian/gpusched.yaml}) is the shared-node example with the
     * package's {@code gpusched} group as the admin group, and nothing else changed but its first comment line.
     */
    @Test
    void thePackagesConfigurationIsTheExampleWithThePackagesAdminGroup() throws Exception {
        Path packaged = DEPLOY.resolveSibling("debian").resolve("gpusched.yaml");
        GpuConfig c = GpuConfig.load(packaged);
        assertThat(c.service().adminGroup()).contains("gpusched");
        List<String> example = Files.readAllLines(DEPLOY.resolve("gpusched.yaml"));
        List<String> ours = Files.readAllLines(packaged);
        assertThat(ours.subList(1, ours.size())).containsExactlyElementsOf(example.subList(1, example.size()).stream()
                .map(l -> l.replace("admin_group: gpuadmin ", "admin_group: gpusched ")).toList());
    }

    @Test
    void theUnitsCommandLineParsesAndTheExampleConfigurationLoads() throws Exception {
        String unit = Files.readString(DEPLOY.resolve("gpusched.service"));
        String exec = unit.lines().filter(l -> l.startsWith("ExecStart=")).findFirst().orElseThrow()
                .substring("ExecStart=/usr/bin/gpusched ".length());
        List<String> args = Arrays.asList(exec.split(" "));
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        GpuschedCommand.commandLine(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).parseArgs(args.toArray(String[]::new));
        assertThat(args).contains("serve", "--socket");
        GpuConfig c = GpuConfig.load(DEPLOY.resolve("gpusched.yaml"));
        assertThat(c.service().adminGroup()).contains("gpuadmin");
        assertThat(c.service().loginCgroups()).containsExactly(Path.of("/sys/fs/cgroup/user.slice"));
        assertThat(c.service().jobCgroupParent().orElseThrow().toString()).startsWith(
                "/sys/fs/cgroup/system.slice/gpusched.service/");
        assertThat(args.get(args.indexOf("--socket") + 1)).isEqualTo(c.service().socket().toString());
    }
}
