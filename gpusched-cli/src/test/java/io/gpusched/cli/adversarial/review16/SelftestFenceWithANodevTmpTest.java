package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Review16: {@code sudo gpusched selftest} where /tmp is mounted {@code nodev} (Debian 13's default /tmp, a tmpfs
 * with nosuid,nodev; README: the package is for "Debian 12 or later"). The fence check makes its device nodes under
 * {@code java.io.tmpdir}, cannot open them (EACCES), and says SKIPPED with "set TMPDIR (java.io.tmpdir) to a directory
 * on a filesystem without nodev" (Selftest.java fence()); the self-test exits 0 with the fence never checked. Doing
 * what it says does not help: the JDK on Linux does not read TMPDIR ({@code java.io.tmpdir} stays {@code /tmp}), and
 * /usr/bin/gpusched passes no {@code -Djava.io.tmpdir}. Here, in a private mount namespace whose /tmp is bound
 * {@code nodev}, the self-test is run as root with TMPDIR set to a directory on a filesystem with devices, as the
 * cause says: the fence is skipped again, naming /tmp.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SelftestFenceWithANodevTmpTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void theFenceIsCheckedWhenTmpIsNodevAndTmpdirIsSetAsTheSelftestSays() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root");
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/unshare")), "needs unshare (util-linux)");
        Path work = Files.createTempDirectory(Path.of("/var/tmp"), "gpusched-r16-");
        try {
            List<String> cmd = new ArrayList<>(List.of("unshare", "-m", "--propagation", "private", "sh", "-c",
                    "mount --bind /tmp /tmp && mount -o remount,bind,nodev /tmp || exit 90; exec \"$@\"", "sh",
                    "env", "TMPDIR=" + work, Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-cp",
                    System.getProperty("java.class.path"), GpuschedCommand.class.getName(), "--simulate", "dgx1-v100",
                    "--state-dir", work.resolve("state").toString(), "--json", "selftest"));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(work.resolve("err.txt").toFile())
                    .redirectOutput(work.resolve("out.txt").toFile());
            pb.environment().remove("GPUSCHED_SOCKET");
            pb.environment().remove("JAVA_TOOL_OPTIONS");
            Process p = pb.start();
            assertThat(p.waitFor(150, TimeUnit.SECONDS)).as("the self-test ended").isTrue();
            assumeTrue(p.exitValue() != 90, "cannot remount /tmp nodev here: " + Files.readString(work.resolve(
                    "err.txt")));
            String out = Files.readString(work.resolve("out.txt"));
            JsonNode fence = null;
            for (JsonNode c : JSON.readTree(out).get("checks")) {
                if (c.get("name").asText().equals("fence")) {
                    fence = c;
                }
            }
            assertThat(fence).as("the fence check in " + out).isNotNull();
            assertThat(fence.get("verdict").asText()).as("the fence check with /tmp nodev and TMPDIR=%s (self-test"
                    + " exit %d): %s", work, p.exitValue(), fence).isEqualTo("PASS");
        } finally {
            new ProcessBuilder("rm", "-rf", work.toString()).start().waitFor();
        }
    }
}
