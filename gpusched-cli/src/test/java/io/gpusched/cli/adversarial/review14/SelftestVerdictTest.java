package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Review14: {@code gpusched selftest}'s exit code. README: "Exit 0 when no check that ran failed, 1 otherwise"; the
 * issue: "exit 0 only when every check that could run passed". These find a run that exits 0 although the fence, as
 * root, cannot be made at all, and a usage error that is reported as a failed check (1) rather than refused (2).
 */
@Tag("adversarial")
@Timeout(120)
class SelftestVerdictTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    record Result(int exit, String out, String err) {
    }

    private static Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static boolean root() throws Exception {
        return Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("Uid:"))
                .anyMatch(l -> l.split("\\s+")[2].equals("0"));
    }

    /**
     * As root, on a host where no cgroup hierarchy is mounted (here: a private mount namespace with /sys/fs/cgroup
     * unmounted, as in a container without cgroups), gpusched cannot fence any job. The fence check says SKIPPED
     * ("device isolation is not available here") and the self-test prints "All checks that could run passed." and
     * exits 0: the one condition the fence check exists to catch is reported as a pass (Selftest.java, fence():
     * {@code unavailable.isPresent()} returns {@code Check.skipped}; SelftestCommand counts only FAIL).
     */
    @Test
    void asRootANodeThatCannotFenceAtAllDoesNotPassTheSelfTest() throws Exception {
        assumeTrue(root(), "needs root (a mount namespace of its own)");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/unshare")), "needs unshare (util-linux)");
        assumeTrue(Files.isDirectory(Path.of("/sys/fs/cgroup")), "needs /sys/fs/cgroup");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder("/usr/bin/unshare", "--mount", "--propagation", "private", "sh", "-c",
                "umount -R /sys/fs/cgroup || exit 99; exec \"$0\" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
                        + " -Xshare:auto -cp \"$1\" " + GpuschedCommand.class.getName()
                        + " selftest --json",
                java, System.getProperty("java.class.path"));
        pb.environment().remove("GPUSCHED_SOCKET");
        Path out = Files.createTempFile("r14-selftest", ".json");
        Path err = Files.createTempFile("r14-selftest", ".err");
        try {
            Process p = pb.redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            if (!p.waitFor(100, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                throw new AssertionError("selftest did not end in 100 s");
            }
            assumeTrue(p.exitValue() != 99, "could not unmount /sys/fs/cgroup here: " + Files.readString(err));
            JsonNode report = JSON.readTree(Files.readString(out));
            JsonNode fence = null;
            for (JsonNode c : report.get("checks")) {
                if (c.get("name").asText().equals("fence")) {
                    fence = c;
                }
            }
            assertThat(fence).as("the fence check in " + report).isNotNull();
            assertThat(fence.get("cause").asText()).contains("not available");
            assertThat(List.of(p.exitValue(), fence.get("verdict").asText()))
                    .as("root, no cgroup to fence with: exit code and the fence's verdict (report: " + report + ")")
                    .isEqualTo(List.of(1, "FAIL"));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /**
     * {@code --console-port 70000} is a bad option value (serve's {@code --listen 127.0.0.1:70000} is refused with
     * 2). selftest takes it, runs every check, reports the console check FAIL with the remedy "port 70000 may be in
     * use" and exits 1 (FAILED), the code of a node that failed a check.
     */
    @Test
    void aConsolePortOutOfRangeIsAUsageErrorNotAFailedCheck() {
        Result serve = gpusched("--simulate", "dgx1-v100", "serve", "--listen", "127.0.0.1:70000");
        assertThat(serve.exit()).as("serve --listen 127.0.0.1:70000: " + serve.err()).isEqualTo(2);
        Result r = gpusched("--simulate", "dgx1-v100", "selftest", "--console-port", "70000");
        assertThat(r.exit()).as("selftest --console-port 70000 (stdout: " + r.out() + ")").isEqualTo(2);
    }
}
