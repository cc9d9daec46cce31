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
     * The most GPUs each owner held at once over the file's whole history (as far back as its last snapshot), keyed
     * {@code uid:<n>} where the record has the owner's uid, else {@code owner:<name>}.
     */
    public final Map<String, Integer> peakGpusByOwner = new LinkedHashMap<>();
    /**
     * Every moment the history granted a GPU that a live exclusive allocation held, or exclusively granted a GPU a live
     * allocation held (one line each, naming both allocations); empty for a sound ledger.
     */
    public final List<String> doubleGrants = new ArrayList<>();
    private final Map<String, String> owners = new LinkedHashMap<>();
    private final Map<String, Integer> heldByOwner = new LinkedHashMap<>();
    private final Map<String, List<String>> holdersByUuid = new LinkedHashMap<>();
    private final Map<String, Boolean> exclusive = new LinkedHashMap<>();

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
                    r.forget(n.get("id").asText());
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
        String id = n.get("id").asText();
        JsonNode req = n.path("request");
        String owner = req.hasNonNull("uid") ? "uid:" + req.get("uid").asLong()
                : req.hasNonNull("owner") ? "owner:" + req.get("owner").asText() : null;
        boolean excl = !req.hasNonNull("sharedBytes");
        for (String u : uuids) {
            List<String> holders = holdersByUuid.computeIfAbsent(u, k -> new ArrayList<>());
            for (String other : holders) {
                if (excl || exclusive.getOrDefault(other, true)) {
                    doubleGrants.add("GPU " + u + " granted to " + id + (excl ? " (exclusive)" : " (shared)")
                            + " while " + other + (exclusive.getOrDefault(other, true) ? " (exclusive)" : " (shared)")
                            + " held it");
                }
            }
            holders.add(id);
        }
        exclusive.put(id, excl);
        if (owner != null) {
            owners.put(id, owner);
            int now = heldByOwner.merge(owner, uuids.size(), Integer::sum);
            peakGpusByOwner.merge(owner, now, Math::max);
        }
        JsonNode h = n.path("request").path("holder");
        live.put(n.get("id").asText(), new Live(n.get("id").asText(), h.isArray() ? h.get(0).asLong() : -1, uuids));
    }

    private void forget(String id) {
        Live l = live.get(id);
        if (l == null) {
            return;
        }
        for (String u : l.uuids()) {
            List<String> holders = holdersByUuid.get(u);
            if (holders != null) {
                holders.remove(id);
            }
        }
        exclusive.remove(id);
        String owner = owners.remove(id);
        if (owner != null) {
            heldByOwner.merge(owner, -l.uuids().size(), Integer::sum);
        }
    }

    /** @return how many GPUs each owner holds now, keyed as {@link #peakGpusByOwner} (owners holding none left out) */
    public Map<String, Integer> heldByOwner() {
        Map<String, Integer> out = new LinkedHashMap<>();
        heldByOwner.forEach((k, v) -> {
            if (v > 0) {
                out.put(k, v);
            }
        });
        return out;
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
