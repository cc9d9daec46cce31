package io.gpusched.cli.adversarial.slurm;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Adversarial review of issue 26 through the command a user runs: the packaged {@code gpusched.jar} of gpusched-cli
 * (an integration test of the CLI module, run after the jar is packaged; it lived in gpu-slurm, which is built
 * before the CLI, so a clean build skipped it for want of the jar). The tests
 * run two at a time (each has its own directory and state directory), each command with C1 only ({@code
 * -XX:TieredStopAtLevel=1}: a short-lived command never reaches C2) and the serial collector (one GC thread on a
 * 2-core machine), as the CLI module's jar tests do.
 */
@Tag("adversarial")
@Execution(ExecutionMode.CONCURRENT)
class SlurmCommandsFromTheJarIT {
    static final Path JAR = Path.of("target", "gpusched.jar").toAbsolutePath().normalize();

    @TempDir
    Path tmp;

    record Result(int rc, String out, String err) {
    }

    @BeforeEach
    void jar() {
        Assumptions.assumeTrue(Files.isRegularFile(JAR), "gpusched-cli jar not built at " + JAR
                + " (./mvnw -pl gpusched-cli -am verify runs this test after packaging it)");
    }

    Result run(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-jar", JAR.toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(tmp.toFile());
        pb.environment().put("GPUSCHED_STATE_DIR", tmp.resolve("state").toString());
        Path out = tmp.resolve("out.txt");
        Path err = tmp.resolve("err.txt");
        pb.redirectOutput(out.toFile()).redirectError(err.toFile());
        Process p = pb.start();
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).as("gpusched exits").isTrue();
        return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
    }

    @Test
    void checkExitCodesAndOneLinePerDrift() throws Exception {
        Result gen = run("--simulate", "dgx1-v100", "export", "slurm", "--cores", "none");
        assertThat(gen.rc()).isZero();
        Files.writeString(tmp.resolve("gres.conf"), gen.out());
        assertThat(run("--simulate", "dgx1-v100", "export", "slurm", "--check", "gres.conf", "--cores", "none").rc())
                .isZero();
        String drift = String.join("\n", gen.out().lines().filter(l -> !l.contains("File=/dev/nvidia5 "))
                .map(l -> l.replace("Type=v100 File=/dev/nvidia3 ", "Type=a100 File=/dev/nvidia3 ")).toList()) + "\n";
        Files.writeString(tmp.resolve("drift.conf"), drift);
        Result r = run("--simulate", "dgx1-v100", "export", "slurm", "--check", "drift.conf", "--cores", "none");
        assertThat(r.rc()).isEqualTo(1);
        List<String> lines = r.out().lines().toList();
        assertThat(lines).filteredOn(l -> l.contains("missing File=/dev/nvidia5")).hasSize(1);
        assertThat(lines).filteredOn(l -> l.contains("wrong Type") && l.contains("/dev/nvidia3")).hasSize(1);
        assertThat(lines).filteredOn(l -> l.contains("wrong count")).hasSize(1);
        Files.write(tmp.resolve("bin.conf"),
                new byte[]{'N', 'a', 'm', 'e', '=', 'g', 'p', 'u', ' ', 0, (byte) 0xff, '\n'});
        Result b = run("--simulate", "dgx1-v100", "export", "slurm", "--check", "bin.conf", "--cores", "none");
        assertThat(b.rc()).isEqualTo(2);
        assertThat(b.err()).contains("bin.conf");
    }

    @Test
    void exportSubcommandsHaveHelp() throws Exception {
        for (String sub : List.of("slurm", "cdi")) {
            Result r = run("export", sub, "--help");
            assertThat(r.rc()).as(sub).isZero();
            assertThat(r.err() + r.out()).doesNotContain("Unknown option");
            assertThat(r.out()).contains("Usage: gpusched export " + sub);
        }
    }

    @Test
    void emptyOrSpacedNodeNameIsRefused() throws Exception {
        for (String bad : List.of("", "a b")) {
            Result r = run("--simulate", "dgx1-v100", "export", "slurm", "--slurm-conf", "--node-name", bad);
            assertThat(r.rc()).as("[%s]", bad).isEqualTo(2);
            assertThat(r.err()).contains("node");
        }
    }

    @Test
    void amdFormatsAgreeOnTheEnvironment() throws Exception {
        Result env = run("--simulate", "mi210-8x", "allocate", "--gpu", "2", "--format", "env");
        assertThat(env.rc()).isZero();
        assertThat(env.out()).contains("ROCR_VISIBLE_DEVICES=");
        for (String f : List.of("docker", "cdi")) {
            Result r = run("--simulate", "mi210-8x", "allocate", "--gpu", "2", "--format", f);
            assertThat(r.rc()).isZero();
            assertThat(r.out()).as(f).contains("-e ROCR_VISIBLE_DEVICES=");
        }
    }

    @Test
    void dockerFlagsNameExactlyTheAllocationsGpus() throws Exception {
        Result r = run("--simulate", "dgx1-v100", "allocate", "--gpu", "2", "--format", "docker");
        assertThat(r.rc()).isZero();
        String id = r.err().replaceAll("(?s).*allocated ([^:]+):.*", "$1");
        Result st = run("--simulate", "dgx1-v100", "status", "--json");
        assertThat(st.rc()).isZero();
        List<String> gpuNodes = new ArrayList<>();
        for (String t : r.out().trim().split("\\s+")) {
            if (t.matches("--device=/dev/nvidia[0-9]+(:.*)?")) {
                gpuNodes.add(t.replaceAll("--device=/dev/nvidia([0-9]+).*", "$1"));
            }
        }
        assertThat(gpuNodes).hasSize(2);
        String uuids = r.out().replaceAll("(?s).*CUDA_VISIBLE_DEVICES=(\\S+).*", "$1");
        assertThat(uuids.split(",")).hasSize(2);
        for (String u : uuids.split(",")) {
            assertThat(st.out()).contains(u);
        }
        assertThat(id).isNotBlank();
        assertThat(new String(r.out().getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8)).doesNotContain(id);
    }
}
