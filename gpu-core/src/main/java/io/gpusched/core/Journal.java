package io.gpusched.core;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.internal.Json;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;


/**
 * The scheduler's write-ahead journal: one JSON line per allocate ({@code A}), release ({@code R}) and renew
 * ({@code N}), each written and forced to disk before the call returns. A header line ({@code H}) carries the id
 * prefix and sequence so ids stay unique across restarts. On start it is replayed (a corrupt or truncated line is
 * skipped with a warning) and compacted to the live allocations by writing a new file and renaming it in place.
 */
final class Journal implements AutoCloseable {

    /**
     * One live allocation as recorded.
     *
     * @param id        allocation id
     * @param uuids     device UUIDs in allocation order
     * @param request   the request
     * @param createdAt creation time
     * @param expiresAt lease end
     */
    record Entry(String id, List<String> uuids, GpuRequest request, Instant createdAt, Optional<Instant> expiresAt) {
    }

    /**
     * What replay found.
     *
     * @param prefix   id prefix of the journal's scheduler
     * @param sequence highest sequence issued
     * @param live     live allocations by id, in order
     * @param warnings skipped lines and why
     */
    record Recovered(Optional<String> prefix, long sequence, Map<String, Entry> live, List<String> warnings) {
    }

    private final Path file;
    private FileChannel channel;

    private Journal(Path file, FileChannel channel) {
        this.file = file;
        this.channel = channel;
    }

    /** Replays a journal; a missing file is an empty one. */
    static Recovered replay(Path file) {
        Map<String, Entry> live = new LinkedHashMap<>();
        List<String> warnings = new ArrayList<>();
        Optional<String> prefix = Optional.empty();
        long seq = 0;
        if (!Files.exists(file)) {
            return new Recovered(prefix, seq, live, warnings);
        }
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new GpuException("cannot read journal " + file + ": " + e.getMessage(), e);
        }
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (line.isBlank()) {
                continue;
            }
            try {
                JsonNode n = Json.MAPPER.readTree(line);
                String op = n.path("op").asText();
                switch (op) {
                    case "H" -> {
                        prefix = Optional.of(n.path("prefix").asText());
                        seq = Math.max(seq, n.path("seq").asLong());
                    }
                    case "A" -> {
                        Entry e = entry(n);
                        live.put(e.id(), e);
                        seq = Math.max(seq, sequenceOf(e.id()));
                    }
                    case "R" -> live.remove(n.path("id").asText());
                    case "N" -> {
                        Entry e = live.get(n.path("id").asText());
                        if (e != null) {
                            live.put(e.id(), new Entry(e.id(), e.uuids(), e.request(), e.createdAt(),
                                    Optional.of(Instant.parse(n.path("expiresAt").asText()))));
                        }
                    }
                    default -> throw new IllegalArgumentException("unknown op \"" + op + "\"");
                }
            } catch (JsonProcessingException | RuntimeException e) {
                warnings.add("journal " + file + " line " + (i + 1) + (i == lines.size() - 1 ? " (last)" : "")
                        + " is corrupt and was skipped: " + e.getMessage().lines().findFirst().orElse(""));
            }
        }
        return new Recovered(prefix, seq, live, warnings);
    }

    static long sequenceOf(String id) {
        int dash = id.lastIndexOf('-');
        try {
            return dash < 0 ? 0 : Long.parseLong(id.substring(dash + 1));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** Rewrites the journal to a header and the live allocations, then opens it for appending. */
    static Journal compactAndOpen(Path file, String prefix, long sequence, Collection<Allocation> live) {
        try {
            Path dir = file.toAbsolutePath().getParent();
            Files.createDirectories(dir);
            Path tmp = dir.resolve(file.getFileName() + ".compact");
            try (FileChannel c = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                write(c, header(prefix, sequence));
                for (Allocation a : live) {
                    write(c, allocated(a));
                }
                c.force(true);
            }
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException ignored) {
                // some file systems cannot sync a directory
            }
            FileChannel c = FileChannel.open(file, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
            return new Journal(file, c);
        } catch (IOException e) {
            throw new GpuException("cannot write journal " + file + ": " + e.getMessage(), e);
        }
    }

    private static void write(FileChannel c, String line) throws IOException {
        ByteBuffer b = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    private void append(String line) {
        try {
            write(channel, line);
            channel.force(false);
        } catch (IOException e) {
            throw new GpuException("journal " + file + " write failed: " + e.getMessage(), e);
        }
    }

    void allocatedDurably(Allocation a) {
        append(allocated(a));
    }

    void releasedDurably(String id) {
        append(json(Map.of("op", "R", "id", id)));
    }

    void renewedDurably(String id, Instant expiresAt) {
        append(json(Map.of("op", "N", "id", id, "expiresAt", expiresAt.toString())));
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // nothing left to do
        }
    }

    private static String header(String prefix, long seq) {
        return json(Map.of("op", "H", "prefix", prefix, "seq", seq));
    }

    private static String allocated(Allocation a) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("op", "A");
        m.put("id", a.id());
        m.put("devices", a.deviceUuids());
        m.put("request", request(a.request()));
        m.put("createdAt", a.createdAt().toString());
        a.expiresAt().ifPresent(e -> m.put("expiresAt", e.toString()));
        return json(m);
    }

    private static String json(Map<String, Object> m) {
        try {
            return Json.MAPPER.writeValueAsString(m);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    static Map<String, Object> request(GpuRequest r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("count", r.count());
        r.minMemory().ifPresent(x -> m.put("minMemoryBytes", x.bytes()));
        r.minComputeCapability().ifPresent(x -> m.put("minComputeCapability", x.toString()));
        r.vendor().ifPresent(x -> m.put("vendor", x.name()));
        r.modelPattern().ifPresent(x -> m.put("model", x));
        if (!r.deviceIndices().isEmpty()) {
            m.put("indices", r.deviceIndices());
        }
        if (!r.deviceUuids().isEmpty()) {
            m.put("uuids", r.deviceUuids());
        }
        r.sharedMemory().ifPresent(x -> m.put("sharedBytes", x.bytes()));
        r.owner().ifPresent(x -> m.put("owner", x));
        r.jobId().ifPresent(x -> m.put("job", x));
        if (!r.labels().isEmpty()) {
            m.put("labels", r.labels());
        }
        r.hint().ifPresent(x -> m.put("hint", x.name()));
        r.preferredNuma().ifPresent(x -> m.put("numa", x));
        r.maxDuration().ifPresent(x -> m.put("maxDurationMs", x.toMillis()));
        return m;
    }

    private static Entry entry(JsonNode n) {
        List<String> uuids = new ArrayList<>();
        n.path("devices").forEach(x -> uuids.add(x.asText()));
        JsonNode r = n.path("request");
        GpuRequest.Builder b = GpuRequest.builder().count(r.path("count").asInt(1));
        if (r.has("minMemoryBytes")) {
            b.minMemory(MemorySize.ofBytes(r.get("minMemoryBytes").asLong()));
        }
        if (r.has("minComputeCapability")) {
            b.minComputeCapability(ComputeCapability.parse(r.get("minComputeCapability").asText()));
        }
        if (r.has("vendor")) {
            b.vendor(GpuVendor.parse(r.get("vendor").asText()));
        }
        if (r.has("model")) {
            b.modelPattern(r.get("model").asText());
        }
        if (r.has("indices")) {
            List<Integer> idx = new ArrayList<>();
            r.get("indices").forEach(x -> idx.add(x.asInt()));
            b.deviceIndices(idx);
        }
        if (r.has("uuids")) {
            List<String> u = new ArrayList<>();
            r.get("uuids").forEach(x -> u.add(x.asText()));
            b.deviceUuids(u);
        }
        if (r.has("sharedBytes")) {
            b.shared(MemorySize.ofBytes(r.get("sharedBytes").asLong()));
        }
        if (r.has("owner")) {
            b.owner(r.get("owner").asText());
        }
        if (r.has("job")) {
            b.jobId(r.get("job").asText());
        }
        if (r.has("labels")) {
            r.get("labels").fields().forEachRemaining(e -> b.label(e.getKey(), e.getValue().asText()));
        }
        if (r.has("hint")) {
            b.hint(WorkloadHint.valueOf(r.get("hint").asText()));
        }
        if (r.has("numa")) {
            b.preferredNuma(r.get("numa").asInt());
        }
        if (r.has("maxDurationMs")) {
            b.maxDuration(Duration.ofMillis(r.get("maxDurationMs").asLong()));
        }
        String id = n.path("id").asText();
        if (id.isEmpty() || uuids.isEmpty()) {
            throw new IllegalArgumentException("allocation record without id or devices");
        }
        return new Entry(id, uuids, b.build(), Instant.parse(n.path("createdAt").asText()),
                n.hasNonNull("expiresAt") ? Optional.of(Instant.parse(n.get("expiresAt").asText())) : Optional.empty());
    }

}
