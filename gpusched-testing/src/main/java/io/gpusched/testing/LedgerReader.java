package io.gpusched.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a node ledger's file by its documented format (a header line, then {@code <seq> <crc> <json>} lines) without
 * gpusched's reader or scheduler: which allocations are live (allocated and not yet released), with their holder pid
 * and GPU UUIDs, and how each ended. It never writes and never reclaims, so what it reports is what the engines'
 * processes themselves wrote. Shared by the engines' deployed tests (the gpusched-testing module).
 */
public final class LedgerReader {

    /** A live allocation: id, holder pid, GPU UUIDs. */
    public record Live(String id, long pid, List<String> uuids) {
    }

    /** An ended allocation: id, holder pid, cause ({@code RELEASED}, {@code RECLAIMED}, ...). */
    public record Ended(String id, long pid, String cause) {
    }

    /** Live allocations by id. */
    public final Map<String, Live> live = new LinkedHashMap<>();
    /** Ended allocations, in ledger order. */
    public final List<Ended> ended = new ArrayList<>();

    /**
     * @param stateDir the node's state directory (its {@code ledger} file is read; none: nothing live)
     * @return what the file records
     */
    public static LedgerReader read(Path stateDir) throws Exception {
        LedgerReader r = new LedgerReader();
        Path file = stateDir.resolve("ledger");
        if (!Files.exists(file)) {
            return r;
        }
        ObjectMapper json = new ObjectMapper();
        String[] lines = Files.readString(file, StandardCharsets.UTF_8).split("\n");
        if (!lines[0].startsWith("gpusched-ledger ")) {
            throw new IllegalStateException("not a ledger: " + lines[0]);
        }
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i];
            int a = line.indexOf(' ');
            int b = line.indexOf(' ', a + 1);
            if (a < 0 || b < 0) {
                continue; // a torn last line
            }
            JsonNode n = json.readTree(line.substring(b + 1));
            switch (n.path("op").asText()) {
                case "A" -> r.allocated(n);
                case "S" -> n.get("live").forEach(r::allocated);
                case "R" -> {
                    Live l = r.live.remove(n.get("id").asText());
                    r.ended.add(new Ended(n.get("id").asText(), l == null ? -1 : l.pid(), n.get("cause").asText()));
                }
                default -> {}
            }
        }
        return r;
    }

    private void allocated(JsonNode n) {
        List<String> uuids = new ArrayList<>();
        n.get("devices").forEach(d -> uuids.add(d.asText()));
        JsonNode h = n.path("request").path("holder");
        live.put(n.get("id").asText(), new Live(n.get("id").asText(), h.isArray() ? h.get(0).asLong() : -1, uuids));
    }

    /** @return live GPU UUIDs by holder pid */
    public Map<Long, List<String>> byHolder() {
        Map<Long, List<String>> out = new LinkedHashMap<>();
        live.values().forEach(l -> out.computeIfAbsent(l.pid(), k -> new ArrayList<>()).addAll(l.uuids()));
        return out;
    }

    @Override
    public String toString() {
        return "live " + live.values() + ", ended " + ended;
    }
}
