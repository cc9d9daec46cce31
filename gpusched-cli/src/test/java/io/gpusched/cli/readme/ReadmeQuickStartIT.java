package io.gpusched.cli.readme;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * README's Java quick start, as a newcomer pastes it: the java block saved as {@code QuickStart.java} next to the
 * repository's {@code gpusched-cli} (a link here, so the tree stays clean), and the bash block's {@code java} line run
 * by bash there. It must compile against the built jars (imports, class path) and run on a host without GPUs (falling
 * back to a simulated node). Runs after {@code package} (failsafe), when {@code gpusched-cli/target/lib} exists, as
 * the bash block's first line ({@code ./gpusched --version}) makes it.
 */
class ReadmeQuickStartIT {

    @Test
    void theQuickStartRunsAsPasted(@TempDir Path dir) throws Exception {
        Path repo = Path.of("").toAbsolutePath().getParent();
        String readme = Files.readString(repo.resolve("README.md"), StandardCharsets.UTF_8);
        String section = readme.substring(readme.indexOf("## Quick start"), readme.indexOf("## Modules"));
        String java = block(section, "```java\n");
        List<String> bash = block(section, "```bash\n").lines().toList();
        assertThat(java).contains("public class QuickStart").contains("import ");
        assertThat(bash.get(0)).startsWith("./gpusched --version");
        String run = bash.stream().filter(l -> l.startsWith("java ")).findFirst().orElseThrow();
        Files.writeString(dir.resolve("QuickStart.java"), java);
        Files.createSymbolicLink(dir.resolve("gpusched-cli"), repo.resolve("gpusched-cli"));
        Process p = new ProcessBuilder("bash", "-c", run).directory(dir.toFile()).start();
        p.getOutputStream().close();
        byte[] out = p.getInputStream().readAllBytes();
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        String stdout = new String(out, StandardCharsets.UTF_8);
        assertThat(p.exitValue()).as("%s%n%s", stdout, err).isZero();
        // two GPUs' UUIDs, or (on a GPU host with smaller cards) the refusal's reason, as the comment says
        assertThat(stdout.matches("(?s)\\[GPU-[^,]+, GPU-[^]]+]\\s*") || err.contains("INSUFFICIENT_"))
                .as("%s%n%s", stdout, err).isTrue();
        // no GPU kernel driver loaded (judged from the host, as HostGpus does): the simulated fallback, said so
        if (!Files.exists(Path.of("/proc/driver/nvidia/version"))
                && !Files.exists(Path.of("/sys/module/amdgpu/initstate"))) {
            assertThat(err).contains("no GPU backend here").contains("simulating dgx1-v100");
        }
    }

    private static String block(String text, String fence) {
        int from = text.indexOf(fence) + fence.length();
        return text.substring(from, text.indexOf("```", from));
    }
}
