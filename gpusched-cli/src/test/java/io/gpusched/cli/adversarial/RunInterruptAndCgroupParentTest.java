package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code gpusched run}'s rough edges from issue 36: Ctrl-C printed "gpusched: Shutdown in progress" (a Java
 * message); {@code --cgroup-parent} with {@code ..} failed with "Operation not permitted" rather than a refusal, and a
 * parent the run created was left behind.
 */
@Tag("adversarial")
class RunInterruptAndCgroupParentTest {

    private static boolean root() throws Exception {
        return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
    }

    @Test
    void ctrlCDuringRunEndsWithoutAJavaMessage(@TempDir Path dir) throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/setpriv")) || Files.isExecutable(Path.of("/bin/setpriv")),
                "setpriv (util-linux) is missing");
        Process run = Cli.start(dir.resolve("state"), "--simulate", "pcie-4xa10", "run", "--no-isolation",
                "--gpu=1", "--", "sh", "-c", "echo STARTED; exec sleep 600");
        BufferedReader r = new BufferedReader(new InputStreamReader(run.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line; (line = r.readLine()) != null;) {
            seen.append(line).append('\n');
            if (line.equals("STARTED")) {
                break;
            }
        }
        assertThat(seen.toString()).contains("STARTED");
        // Ctrl-C: the terminal sends SIGINT to the foreground group; here to the gpusched JVM (its job dies with it)
        new ProcessBuilder("kill", "-INT", Long.toString(run.pid())).start().waitFor();
        assertThat(run.waitFor(60, TimeUnit.SECONDS)).as("run ended after SIGINT").isTrue();
        String rest = new String(run.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(seen + rest).doesNotContain("Shutdown in progress").doesNotContain("Exception");
        assertThat(Cli.run(dir.resolve("state"), "--simulate", "pcie-4xa10", "status", "--json").out())
                .contains("\"allocations\" : [ ]");
    }

    @Test
    void aCgroupParentWithDotDotIsRefusedBeforeAnythingIsMade(@TempDir Path dir) throws Exception {
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        Path cgroupRoot = Files.exists(v2.resolve("cgroup.procs")) ? v2 : Path.of("/sys/fs/cgroup");
        assumeTrue(root() && Files.exists(cgroupRoot.resolve("cgroup.procs")), "needs root and cgroup2");
        String name = "gpusched-test-" + UUID.randomUUID().toString().substring(0, 8);
        for (String parent : new String[]{cgroupRoot + "/" + name + "/../" + name + "-x", name + "/rel",
            dir.resolve(name).toString(), cgroupRoot + "/./" + name}) {
            Cli.Result r = Cli.run(dir.resolve("state"), "--simulate", "pcie-4xa10", "run", "--gpu=1",
                    "--cgroup-parent", parent, "--", "true");
            assertThat(r.exit()).as(parent + ": " + r.err()).isEqualTo(2);
            assertThat(r.err()).as(parent).contains("--cgroup-parent").doesNotContain("Operation not permitted")
                    .doesNotContain("Exception");
            assertThat(r.err().strip().lines()).as(r.err()).hasSize(1);
        }
        assertThat(cgroupRoot.resolve(name)).doesNotExist();
        assertThat(cgroupRoot.resolve(name + "-x")).doesNotExist();
        assertThat(dir.resolve(name)).doesNotExist();
    }

    @Test
    void aCgroupParentTheRunMadeIsRemovedAfterIt(@TempDir Path dir) throws Exception {
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        Path cgroupRoot = Files.exists(v2.resolve("cgroup.procs")) ? v2 : Path.of("/sys/fs/cgroup");
        assumeTrue(root() && Files.exists(cgroupRoot.resolve("cgroup.procs")), "needs root and cgroup2");
        String name = "gpusched-test-" + UUID.randomUUID().toString().substring(0, 8);
        Path parent = cgroupRoot.resolve(name).resolve("jobs");
        try {
            Cli.Result r = Cli.run(dir.resolve("state"), "--simulate", "pcie-4xa10", "run", "--gpu=1",
                    "--cgroup-parent", parent.toString(), "--", "sh", "-c", "cat /proc/self/cgroup");
            assumeTrue(!r.err().contains("isolation is off"), "isolation unavailable: " + r.err());
            assertThat(r.exit()).as(r.err()).isZero();
            assertThat(r.out()).contains(name + "/jobs/job-");
            assertThat(cgroupRoot.resolve(name)).as("the parents the run made are gone").doesNotExist();
            // a parent that was there before stays
            Files.createDirectories(parent);
            Cli.Result again = Cli.run(dir.resolve("state"), "--simulate", "pcie-4xa10", "run", "--gpu=1",
                    "--cgroup-parent", parent.toString(), "--", "true");
            assertThat(again.exit()).as(again.err()).isZero();
            assertThat(parent).exists();
        } finally {
            for (Path p : new Path[]{parent, cgroupRoot.resolve(name)}) {
                Files.deleteIfExists(p);
            }
        }
    }
}
