package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: {@code gpusched selftest} on a healthy simulated node fails when {@code java.io.tmpdir} is a path of
 * about 45 characters or more (such as the directory the fence check's own remedy asks for: "set TMPDIR
 * (java.io.tmpdir) to a directory on a filesystem without nodev"). The kubernetes check puts the kubelet stand-in's
 * and the plug-in's Unix sockets in {@code <tmpdir>/gpusched-selftest-<19 digits>/k8s/}
 * ({@code gpusched-nvidia.com-gpu.sock}); past the 107 bytes of {@code sun_path} the plug-in cannot reach the
 * stand-in, and the check says FAIL after 30 s, "no Register call within 30 s", with the remedy to report the
 * plug-in's log: a failure of the self-test's own set-up, reported as the plug-in's. The plug-in itself uses
 * /var/lib/kubelet/device-plugins (short).
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SelftestInALongTmpdirTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    @Test
    void theKubernetesCheckPassesOnAHealthyNodeWhateverTheTmpdir() throws Exception {
        // 50 characters or so: /tmp/junit-<digits>/ and a directory name
        Path tmp = dir.resolve("t".repeat(Math.max(1, 50 - dir.toString().length() - 1)));
        Files.createDirectories(tmp);
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Djava.io.tmpdir=" + tmp, "-cp",
                System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--simulate", "dgx1-v100", "--state-dir",
                dir.resolve("state").toString(), "--json", "selftest"));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(dir.resolve("err.txt").toFile())
                .redirectOutput(dir.resolve("out.txt").toFile());
        pb.environment().remove("GPUSCHED_SOCKET");
        pb.environment().remove("JAVA_TOOL_OPTIONS");
        Process p = pb.start();
        assertThat(p.waitFor(150, TimeUnit.SECONDS)).as("the self-test ended").isTrue();
        String out = Files.readString(dir.resolve("out.txt"));
        JsonNode kubernetes = null;
        for (JsonNode c : JSON.readTree(out).get("checks")) {
            if (c.get("name").asText().equals("kubernetes")) {
                kubernetes = c;
            }
        }
        assertThat(kubernetes).as("the kubernetes check in " + out).isNotNull();
        assertThat(kubernetes.get("verdict").asText()).as("the kubernetes check with java.io.tmpdir=%s (%d"
                + " characters; self-test exit %d): %s", tmp, tmp.toString().length(), p.exitValue(), kubernetes)
                .isEqualTo("PASS");
    }
}
