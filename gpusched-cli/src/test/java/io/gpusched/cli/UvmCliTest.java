package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The command and {@code nvidia-uvm} (issue 32): {@code export cdi} of a simulated node gives the uvm nodes with the
 * node's own numbers; {@code doctor}, with {@code /proc} and {@code /dev} fixture trees given as README says
 * ({@code -Dgpusched.proc.root}, {@code -Dgpusched.dev.root}), says the module is not loaded, what that means and how
 * to load it, in text and in {@code --json}.
 */
class UvmCliTest {
    @TempDir
    Path tmp;

    @Test
    void exportCdiOfASimulatedNodeHasTheUvmNodesWithItsOwnNumbers() throws Exception {
        CliRunner.Result r = new CliRunner(tmp.resolve("state")).run("--simulate", "dgx1-v100", "export", "cdi",
                "--format", "json");
        assertThat(r.exit()).as(r.err()).isZero();
        JsonNode nodes = new ObjectMapper().readTree(r.out()).get("containerEdits").get("deviceNodes");
        StringBuilder seen = new StringBuilder();
        nodes.forEach(n -> seen.append(n.get("path").asText()).append('=').append(n.path("major").asInt(-1))
                .append(':').append(n.path("minor").asInt(-1)).append(' '));
        assertThat(seen.toString()).contains("/dev/nvidia-uvm=510:0 ", "/dev/nvidia-uvm-tools=510:1 ");
    }

    @Test
    void doctorSaysWhenUvmIsNotLoadedWhatItMeansAndHowToLoadIt() throws Exception {
        Path proc = Files.createDirectories(tmp.resolve("proc/driver/nvidia")).getParent().getParent();
        Files.writeString(proc.resolve("driver/nvidia/version"), "NVRM version: NVIDIA UNIX x86_64 Kernel Module"
                + "  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n");
        Files.writeString(proc.resolve("devices"), "Character devices:\n195 nvidia-frontend\n\nBlock devices:\n");
        Path dev = Files.createDirectories(tmp.resolve("dev"));
        String text = doctor(proc, dev);
        assertThat(text).contains("NVIDIA unified memory (nvidia-uvm):")
                .contains("[--]  nvidia-uvm is not loaded").contains("a CUDA program cannot initialise")
                .contains("-> as root: nvidia-modprobe -u -c=0");
        JsonNode json = new ObjectMapper().readTree(doctor(proc, dev, "--json").replaceFirst("(?s)^[^{]*", ""));
        assertThat(json.get("uvm").get("checked").asBoolean()).isTrue();
        assertThat(json.get("uvm").get("major").isNull()).isTrue();
        assertThat(json.get("uvm").get("advice").asText()).contains("nvidia-modprobe -u -c=0");
    }

    private String doctor(Path proc, Path dev, String... more) throws Exception {
        List<String> cmd = new java.util.ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString(), "-XX:TieredStopAtLevel=1", "-Dgpusched.proc.root=" + proc, "-Dgpusched.dev.root=" + dev,
                "-Dgpusched.native.disable=true", "-cp", System.getProperty("java.class.path"),
                GpuschedCommand.class.getName(), "--state-dir", tmp.resolve("state").toString()));
        cmd.add("doctor");
        cmd.addAll(List.of(more));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        return out;
    }
}
