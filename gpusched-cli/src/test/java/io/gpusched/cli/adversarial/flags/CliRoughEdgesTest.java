package io.gpusched.cli.adversarial.flags;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36's command-side rough edges, each as the user met it: other scripts' digits, usage dumps for a too large or
 * repeated count, {@code --format xml} checked only after allocating, {@code --cuda '>=12'}, a refusal without its
 * reason code, a {@code --target} for another node, a release hint without the state directory, {@code doctor
 * --simulate} describing the host.
 */
@Tag("adversarial")
class CliRoughEdgesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    record Result(int exit, String out, String err) {
    }

    static Result gpusched(List<String> args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(args.toArray(String[]::new));
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static Result sim(Path state, String... args) {
        List<String> all = new ArrayList<>(List.of("--simulate", "pcie-4xa10", "--state-dir", state.toString()));
        all.addAll(List.of(args));
        return gpusched(all);
    }

    /** @return the record lines of the node ledger (every line after the header), read here, not by gpusched */
    private static long records(Path state) throws IOException {
        Path ledger = state.resolve("ledger");
        return Files.exists(ledger) ? Math.max(0, Files.readAllLines(ledger).size() - 1) : 0;
    }

    private static void oneLineRefusal(Result r, String what) {
        assertThat(r.exit()).as("%s: %s", what, r.err()).isEqualTo(2);
        assertThat(r.out()).as(what).isEmpty();
        assertThat(r.err().strip().lines()).as("%s: one line, no usage dump: %s", what, r.err()).hasSize(1);
        assertThat(r.err()).as(what).startsWith("gpusched: ").doesNotContain("Usage:");
    }

    @Test
    void onlyAsciiDigitsAreNumbers(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        for (String n : List.of("\u0663", "\uff13", "\u0969", "+3", "3 ", "-1", "0x3", "\u0661\u0660")) {
            oneLineRefusal(sim(state, "allocate", "--gpu=" + n), "--gpu=" + n);
            oneLineRefusal(sim(state, "watch", "--count=" + n, "--no-ansi"), "watch --count=" + n);
            oneLineRefusal(sim(state, "k8s-device-plugin", "--replicas=" + n, "--device-plugin-dir",
                    dir.resolve("kubelet").toString()), "--replicas=" + n);
        }
        for (String port : List.of("\u0661\u0669\u0664\u0661\u0663", "+9400", "9400\u0660", "65536")) {
            Result r = sim(state, "serve", "--listen", "127.0.0.1:" + port);
            oneLineRefusal(r, "--listen :" + port);
            assertThat(r.err()).contains("port");
        }
        assertThat(records(state)).as("nothing was allocated").isZero();
        Result three = sim(state, "allocate", "--gpu=3");
        assertThat(three.exit()).as(three.err()).isZero();
    }

    @Test
    void aCountTooLargeOrGivenTwiceIsOneLine(@TempDir Path dir) {
        Path state = dir.resolve("state");
        Result big = sim(state, "allocate", "--gpu=2147483648");
        oneLineRefusal(big, "--gpu=2147483648");
        assertThat(big.err()).contains("--gpu").contains("2147483647");
        Result twice = sim(state, "allocate", "--gpu=1", "--gpu=2");
        oneLineRefusal(twice, "--gpu=1 --gpu=2");
        assertThat(twice.err()).contains("--gpu").contains("once");
        oneLineRefusal(sim(state, "run", "--gpu=1", "--gpu=2", "--no-isolation", "--", "true"), "run --gpu twice");
    }

    @Test
    void anUnknownFormatIsRefusedBeforeAnythingIsWritten(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        Result r = sim(state, "allocate", "--gpu=1", "--format", "xml");
        oneLineRefusal(r, "--format xml");
        assertThat(r.err()).contains("env, docker or cdi");
        assertThat(records(state)).as("no allocate and release records").isZero();
    }

    @Test
    void cudaRequirementsAsTheMessageOffersThem(@TempDir Path dir) {
        Path state = dir.resolve("state");
        for (String req : List.of(">=12", ">=12.1", "12", "12.4")) {
            Result r = sim(state, "allocate", "--gpu=1", "--cuda", req);
            assertThat(r.err()).as(req).doesNotContain("invalid CUDA requirement");
            if (r.exit() != 0) { // this host has no CUDA that fits the simulated node's driver 535
                assertThat(r.err()).as(req).startsWith("gpusched: NO_MATCHING_CUDA: ").doesNotContain("this host");
            }
        }
        Result bad = sim(state, "allocate", "--gpu=1", "--cuda", ">=twelve");
        oneLineRefusal(bad, "--cuda >=twelve");
        assertThat(bad.err()).contains(">=12\"");
    }

    @Test
    void aTargetForAnotherNodeIsRefusedNamingThisOne(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        Result r = sim(state, "allocate", "--target", "othernode::1,2");
        oneLineRefusal(r, "--target othernode::1,2");
        String self = Files.readString(Path.of("/proc/sys/kernel/hostname")).strip().toLowerCase(Locale.ROOT);
        assertThat(r.err()).contains("othernode").contains(self);
        oneLineRefusal(sim(state, "run", "--target", "othernode::1", "--no-isolation", "--", "true"), "run");
        assertThat(records(state)).isZero();
        for (String mine : List.of("localhost::1,2", self + "::0", "::3")) {
            Result ok = sim(state, "allocate", "--target", mine, "--json");
            assertThat(ok.exit()).as("%s: %s", mine, ok.err()).isZero();
        }
        Result one = sim(dir.resolve("other"), "allocate", "--target", self.toUpperCase(Locale.ROOT), "--json");
        assertThat(one.exit()).as("host names are case-insensitive: %s", one.err()).isZero();
    }

    /** The hint, pasted into a shell as printed, releases the allocation in the ledger it was made in. */
    @Test
    void theReleaseHintNamesTheStateDirectory(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("my state");
        Result a = sim(state, "allocate", "--gpu=2");
        assertThat(a.exit()).as(a.err()).isZero();
        String hint = a.out().lines().filter(l -> l.startsWith("release with: ")).findFirst().orElseThrow()
                .substring("release with: ".length());
        assertThat(hint).contains("--state-dir").contains("--simulate pcie-4xa10");
        Process p = new ProcessBuilder("bash", "-c", "eval \"set -- $1\"; printf '%s\\n' \"$@\"", "bash", hint)
                .start();
        List<String> words = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).lines().toList();
        assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(words.get(0)).isEqualTo("gpusched");
        Result released = gpusched(words.subList(1, words.size()));
        assertThat(released.exit()).as(released.err()).isZero();
        assertThat(released.out()).startsWith("released ");
        JsonNode st = JSON.readTree(sim(state, "status", "--json").out());
        assertThat(st.path("allocations")).isEmpty();
        Result env = sim(state, "allocate", "--gpu=1", "--format", "env");
        assertThat(env.err()).contains("--state-dir '" + state.toAbsolutePath() + "'");
    }

    /**
     * {@code doctor --simulate} describes the simulated node: it says so first, judges CUDA against the node's
     * driver (535.183.01 in the simulated profile), offers no "use --simulate" remedy, and names where a version was
     * read as a file, not an internal name. A CUDA tree made here (include/cuda.h only) is found through
     * {@code gpu.cuda_paths}.
     */
    @Test
    void doctorDescribesTheSimulatedNode(@TempDir Path dir) throws Exception {
        Path cuda = Files.createDirectories(dir.resolve("cuda-12.4/include"));
        Files.writeString(cuda.resolve("cuda.h"), "#define CUDA_VERSION 12040\n");
        Path config = dir.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  cuda_paths: [" + dir.resolve("cuda-12.4") + "]\n");
        Result r = gpusched(List.of("--simulate", "dgx1-v100", "--config", config.toString(), "doctor"));
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).startsWith("Node: simulated").contains("535.183.01")
                .contains("not used by the simulated node").doesNotContain("no backend works here")
                .contains("from include/cuda.h").doesNotContain("CUDA_H");
        Result js = gpusched(List.of("--simulate", "dgx1-v100", "--config", config.toString(), "doctor", "--json"));
        JsonNode n = JSON.readTree(js.out());
        assertThat(n.path("node").path("simulated").asBoolean()).isTrue();
        assertThat(n.path("node").path("gpus").asInt()).isEqualTo(8);
        assertThat(n.path("driver").asText()).isEqualTo("535.183.01");
        Result host = gpusched(List.of("--config", config.toString(), "doctor"));
        assertThat(host.out()).startsWith("Inventory providers").doesNotContain("Node: simulated");
    }
}
