package io.gpusched.core;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.zip.CRC32C;

/**
 * An independent reader and checker of a node ledger's history for tests. It does not reuse the production reader:
 * it parses the documented format itself (header line; lines of "seq crc32c json") with its own CRC check, and
 * replays allocations and releases by id to check, after every record in sequence order: no GPU in two live
 * exclusive allocations, no GPU both exclusive and shared, shared reservations never over the GPU's memory, no id
 * allocated twice, sequences consecutive.
 */
final class LedgerHistory {
    final List<String> violations = new ArrayList<>();
    final Map<String, JsonNode> live = new LinkedHashMap<>();
    final Set<String> allocatedEver = new HashSet<>();
    final Set<String> releasedEver = new HashSet<>();
    final Map<String, Long> reclaimedHolder = new HashMap<>();
    long records;

    static LedgerHistory check(Path file, Map<String, Long> memoryByUuid) throws Exception {
        LedgerHistory h = new LedgerHistory();
        ObjectMapper json = new ObjectMapper();
        String text = Files.readString(file, StandardCharsets.UTF_8);
        String[] lines = text.split("\n", -1);
        if (!lines[0].startsWith("gpusched-ledger 1 ")) {
            h.violations.add("bad header " + lines[0]);
        }
        long prev = -1;
        for (int i = 1; i < lines.length; i++) {
            String line = lines[i];
            if (line.isEmpty() && i == lines.length - 1) {
                break;
            }
            int a = line.indexOf(' ');
            int b = line.indexOf(' ', a + 1);
            long seq = Long.parseLong(line.substring(0, a));
            String body = line.substring(b + 1);
            CRC32C crc = new CRC32C();
            crc.update((line.substring(0, a) + " " + body).getBytes(StandardCharsets.UTF_8));
            if (crc.getValue() != Long.parseLong(line.substring(a + 1, b), 16)) {
                h.violations.add("crc mismatch at seq " + seq);
            }
            if (prev >= 0 && seq != prev + 1) {
                h.violations.add("sequence " + seq + " after " + prev);
            }
            prev = seq;
            h.records++;
            JsonNode n = json.readTree(body);
            switch (n.get("op").asText()) {
                case "A" -> h.allocate(n, seq);
                case "S" -> n.get("live").forEach(x -> h.allocate(x, seq));
                case "R" -> {
                    String id = n.get("id").asText();
                    if (h.live.remove(id) == null) {
                        h.violations.add("release of " + id + " which is not live at seq " + seq);
                    }
                    h.releasedEver.add(id);
                    if (n.get("cause").asText().equals("RECLAIMED")) {
                        h.reclaimedHolder.put(id, n.get("holder").get(0).asLong());
                    }
                }
                default -> {}
            }
            h.checkInvariants(seq, memoryByUuid);
        }
        return h;
    }

    private void allocate(JsonNode n, long seq) {
        String id = n.get("id").asText();
        if (!allocatedEver.add(id)) {
            violations.add("id " + id + " allocated twice (seq " + seq + ")");
        }
        live.put(id, n);
    }

    private void checkInvariants(long seq, Map<String, Long> memoryByUuid) {
        Map<String, String> exclusive = new HashMap<>();
        Map<String, Long> shared = new HashMap<>();
        for (Map.Entry<String, JsonNode> e : live.entrySet()) {
            JsonNode req = e.getValue().get("request");
            for (JsonNode d : e.getValue().get("devices")) {
                String uuid = d.asText();
                if (req.has("sharedBytes")) {
                    shared.merge(uuid, req.get("sharedBytes").asLong(), Long::sum);
                } else {
                    String prev = exclusive.put(uuid, e.getKey());
                    if (prev != null) {
                        violations.add("seq " + seq + ": GPU " + uuid + " in two live exclusive allocations " + prev
                                + " and " + e.getKey());
                    }
                }
            }
        }
        for (Map.Entry<String, Long> e : shared.entrySet()) {
            if (exclusive.containsKey(e.getKey())) {
                violations.add("seq " + seq + ": GPU " + e.getKey() + " exclusive and shared at once");
            }
            if (e.getValue() > memoryByUuid.get(e.getKey())) {
                violations.add("seq " + seq + ": GPU " + e.getKey() + " reserved " + e.getValue() + " bytes");
            }
        }
    }
}
