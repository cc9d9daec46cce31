package io.gpusched.core.adversarial.gather;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.zip.CRC32C;

/**
 * An independent checker of a node ledger file for the gathering attacks, written from the documented format
 * (header line, then {@code <seq> <crc32c hex of "seq json"> <json>} lines) with none of the library's code. It
 * replays {@code A} (allocate) and {@code R} (release) records in file order and collects violations: a bad CRC, a
 * sequence gap or repeat, a GPU granted exclusively while another live allocation holds it, an id allocated twice, a
 * release of an id not live, a torn last line, a snapshot record (the tests stay below the compaction size). Then
 * {@link #acknowledged} checks every acknowledged change against the file.
 */
final class History {
    final List<String> violations = new ArrayList<>();
    /** Allocation id to its devices, for every A record. */
    final Map<String, List<String>> allocated = new HashMap<>();
    /** Ids released by an R record. */
    final Set<String> released = new HashSet<>();
    int records;

    static History check(Path ledger) throws IOException {
        History h = new History();
        ObjectMapper json = new ObjectMapper();
        String text = Files.readString(ledger, StandardCharsets.UTF_8);
        if (!text.isEmpty() && !text.endsWith("\n")) {
            h.violations.add("torn last line in " + ledger);
        }
        String[] lines = text.split("\n");
        if (lines.length == 0 || !lines[0].startsWith("gpusched-ledger ")) {
            h.violations.add("no header in " + ledger);
            return h;
        }
        Map<String, String> holder = new HashMap<>(); // device uuid -> live exclusive allocation id
        Map<String, List<String>> live = new HashMap<>();
        long prev = -1;
        for (int i = 1; i < lines.length; i++) {
            String[] f = lines[i].split(" ", 3);
            if (f.length != 3) {
                h.violations.add("line " + (i + 1) + " is not '<seq> <crc> <json>'");
                continue;
            }
            long seq = Long.parseLong(f[0]);
            CRC32C crc = new CRC32C();
            crc.update((f[0] + " " + f[2]).getBytes(StandardCharsets.UTF_8));
            if (crc.getValue() != Long.parseLong(f[1], 16)) {
                h.violations.add("crc mismatch at seq " + seq);
            }
            if (prev >= 0 && seq != prev + 1) {
                h.violations.add("sequence " + seq + " after " + prev);
            }
            prev = seq;
            h.records++;
            JsonNode n = json.readTree(f[2]);
            String op = n.path("op").asText();
            String id = n.path("id").asText();
            switch (op) {
                case "A" -> {
                    List<String> devs = new ArrayList<>();
                    n.path("devices").forEach(d -> devs.add(d.asText()));
                    if (h.allocated.put(id, devs) != null) {
                        h.violations.add("id " + id + " allocated twice (seq " + seq + ")");
                    }
                    live.put(id, devs);
                    boolean exclusive = !n.path("request").has("sharedBytes");
                    for (String d : devs) {
                        String other = holder.get(d);
                        if (other != null) {
                            h.violations
                                    .add("seq " + seq + ": " + id + " granted " + d + " held exclusively by " + other);
                        }
                        if (exclusive) {
                            holder.put(d, id);
                        }
                    }
                }
                case "R" -> {
                    List<String> devs = live.remove(id);
                    if (devs == null) {
                        h.violations.add("seq " + seq + ": release of " + id + " which is not live");
                    } else {
                        devs.forEach(d -> holder.remove(d, id));
                    }
                    h.released.add(id);
                }
                case "S" -> h.violations.add("seq " + seq + ": snapshot record (test grew past compaction)");
                default -> {
                }
            }
        }
        return h;
    }

    /**
     * Every acknowledged change is in the file: {@code acks} are lines "A id uuid,uuid" (an allocate that returned)
     * and "R id" (a release that returned true).
     */
    void acknowledged(List<String> acks) {
        for (String a : acks) {
            String[] f = a.split(" ");
            if (f[0].equals("A")) {
                List<String> devs = allocated.get(f[1]);
                if (devs == null) {
                    violations.add("acknowledged allocation " + f[1] + " is not in the file");
                } else if (!String.join(",", devs).equals(f[2])) {
                    violations.add("acknowledged allocation " + f[1] + " got " + f[2] + ", the file says " + devs);
                }
            } else if (!released.contains(f[1])) {
                violations.add("acknowledged release of " + f[1] + " is not in the file");
            }
        }
    }
}
