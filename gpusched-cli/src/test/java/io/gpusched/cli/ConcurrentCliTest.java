package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Several gpusched processes allocate at once against one state directory. Checked from their own outputs, not by
 * asking the scheduler: no GPU is handed to two acknowledged allocations, no id is given twice, and every
 * acknowledged allocation is listed by a later {@code status}.
 */
class ConcurrentCliTest {
    static final Pattern ALLOCATED = Pattern.compile("allocated (\\S+): GPUs \\[([0-9, ]+)]");

    @Test
    void concurrentCliInvocationsNeverHandOutAGpuTwice(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        int processes = 6;
        List<Process> running = new ArrayList<>();
        for (int i = 0; i < processes; i++) {
            running.add(ChildCli.start(state, "--simulate", "pcie-4xa10", "allocate", "--gpu=1", "--owner=p" + i));
        }
        Map<String, List<Integer>> acknowledged = new HashMap<>();
        Map<Integer, String> gpuHolder = new HashMap<>();
        List<String> refusals = new ArrayList<>();
        for (Process p : running) {
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
            Matcher m = ALLOCATED.matcher(out);
            if (p.exitValue() == 0) {
                assertThat(m.find()).as(out).isTrue();
                List<Integer> gpus = new ArrayList<>();
                for (String g : m.group(2).split(",\\s*")) {
                    gpus.add(Integer.parseInt(g.trim()));
                }
                assertThat(acknowledged.put(m.group(1), gpus)).as("id %s given twice", m.group(1)).isNull();
                for (int g : gpus) {
                    String before = gpuHolder.put(g, m.group(1));
                    assertThat(before).as("GPU %d handed to %s and %s", g, before, m.group(1)).isNull();
                }
            } else {
                refusals.add(out);
                assertThat(out).as("a refused allocate says why in one line").contains("gpusched: ");
            }
        }
        // 4 GPUs, 6 exclusive single-GPU requests: exactly 4 acknowledged, 2 refused
        assertThat(acknowledged).as("refusals: %s", refusals).hasSize(4);
        ChildCli.Result st = ChildCli.run(state, "--simulate", "pcie-4xa10", "--json", "status");
        assertThat(st.exit()).as(st.out()).isZero();
        JsonNode json = new ObjectMapper().readTree(st.out().substring(st.out().indexOf('{')));
        Set<String> listed = new HashSet<>();
        json.get("allocations").forEach(a -> listed.add(a.get("id").asText()));
        assertThat(listed).containsAll(acknowledged.keySet());
    }
}
