package io.gpusched.yarn.adversarial.combinedcommit;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The node ledger file walked by its documented format ({@code <seq> <crc> <json>} lines after a
 * {@code gpusched-ledger} header; only the last line may be torn), checking as it goes that no allocation record takes
 * a GPU a live record holds. Written for these tests, independent of gpusched's reader.
 */
final class LedgerWalk {
    /** GPU UUIDs of each allocation record, by id. */
    final Map<String, List<String>> granted = new HashMap<>();
    /** The container id label of each allocation record that has one, by id. */
    final Map<String, String> container = new HashMap<>();
    /** Ids of allocation records that ended, in file order. */
    final List<String> ended = new ArrayList<>();
    /** What is live at the end: GPU UUID to id. */
    final Map<String, String> holder = new HashMap<>();

    static LedgerWalk of(Path stateDir) throws Exception {
        LedgerWalk w = new LedgerWalk();
        ObjectMapper json = new ObjectMapper();
        List<String> lines = Files.readAllLines(stateDir.resolve("ledger"), StandardCharsets.UTF_8);
        assertThat(lines.get(0)).startsWith("gpusched-ledger ");
        for (int i = 1; i < lines.size(); i++) {
            String line = lines.get(i);
            int a = line.indexOf(' ');
            int b = line.indexOf(' ', a + 1);
            JsonNode n;
            try {
                n = json.readTree(line.substring(b + 1));
            } catch (Exception torn) {
                assertThat(i).as("only the last line may be torn: %s", line).isEqualTo(lines.size() - 1);
                continue;
            }
            String id = n.path("id").asText();
            switch (n.path("op").asText()) {
                case "A" -> {
                    List<String> us = new ArrayList<>();
                    for (JsonNode u : n.get("devices")) {
                        assertThat(w.holder).as("line %d: %s takes GPU %s", i, id, u.asText())
                                .doesNotContainKey(u.asText());
                        w.holder.put(u.asText(), id);
                        us.add(u.asText());
                    }
                    w.granted.put(id, us);
                    JsonNode label = n.path("request").path("labels").path("yarn.container");
                    if (!label.isMissingNode()) {
                        w.container.put(id, label.asText());
                    }
                }
                case "R" -> {
                    assertThat(w.ended).as("line %d: %s ends twice", i, id).doesNotContain(id);
                    w.ended.add(id);
                    for (String u : w.granted.getOrDefault(id, List.of())) {
                        w.holder.remove(u);
                    }
                }
                case "S" -> throw new IllegalStateException("a compaction snapshot in a short test ledger: " + line);
                default -> {}
            }
        }
        return w;
    }
}
