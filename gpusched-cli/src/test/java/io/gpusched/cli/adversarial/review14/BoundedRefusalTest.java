package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.StringJoiner;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review14: bounded refusal messages. On a simulated 1,024-GPU node a refusal's message should summarize past a few
 * devices (counts by reason, the first few ids). A request naming its GPUs explicitly ({@code --devices}) is refused
 * with {@code GpuRequest.describe()} in the message, and describe() names every requested index
 * ({@code "indices " + deviceIndices}, GpuRequest.java:319-321): the message grows with the node.
 */
@Tag("adversarial")
@Timeout(120)
class BoundedRefusalTest {
    /** Far above what a summarized refusal needs (the bounded ones here are about 100 to 300 characters). */
    static final int BOUND = 1024;

    @TempDir
    Path dir;
    Path node;
    String all;

    record Result(int exit, String out, String err) {
    }

    @BeforeEach
    void aThousandGpuNode() throws Exception {
        StringBuilder y = new StringBuilder("node: review14-1024\n"
                + "defaults: {vendor: NVIDIA, name: NVIDIA A10, memory: 24GiB, compute_capability: \"8.6\"}\n"
                + "devices:\n");
        StringJoiner ids = new StringJoiner(",");
        for (int i = 0; i < 1024; i++) {
            y.append(String.format("  - {index: %d, pci_bus_id: \"0000%04X:%02X:00.0\"}%n", i, i / 256, i % 256));
            ids.add(String.valueOf(i));
        }
        node = dir.resolve("node-1024.yaml");
        Files.writeString(node, y);
        all = ids.toString();
    }

    private Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        String[] full = new String[args.length + 4];
        full[0] = "--simulate";
        full[1] = node.toString();
        full[2] = "--state-dir";
        full[3] = dir.resolve("state").toString();
        System.arraycopy(args, 0, full, 4, args.length);
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(full);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void theSummarizedRefusalsOfThisNodeAreShort() {
        assertThat(gpusched("allocate", "--gpu=1").exit()).isZero();
        Result r = gpusched("allocate", "--gpu=1024");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpusched: INSUFFICIENT_GPUS: ").hasSizeLessThan(BOUND);
    }

    /** INSUFFICIENT_MEMORY for 1,024 named GPUs: the message repeats all 1,024 indices (about 5 KB). */
    @Test
    void aRefusalOfAThousandNamedGpusForTheirMemoryIsBounded() {
        Result r = gpusched("allocate", "--devices", all, "--gpu-memory", "100GB");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpusched: INSUFFICIENT_MEMORY: ");
        assertThat(r.err()).as("the refusal's message (" + r.err().length() + " characters)")
                .doesNotContain("500, 501, 502").hasSizeLessThan(BOUND);
    }

    /** NO_MATCHING_DEVICE for 1,024 named GPUs (a model none has): the same unbounded echo, through --json too. */
    @Test
    void aRefusalOfAThousandNamedGpusForTheirModelIsBoundedWithJsonToo() {
        Result r = gpusched("--json", "allocate", "--devices", all, "--model", "*H100*");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpusched: NO_MATCHING_DEVICE: ");
        assertThat(r.err()).as("standard error (" + r.err().length() + " characters)").hasSizeLessThan(BOUND);
        assertThat(r.out()).as("the --json error document (" + r.out().length() + " characters)")
                .hasSizeLessThan(BOUND);
    }
}
