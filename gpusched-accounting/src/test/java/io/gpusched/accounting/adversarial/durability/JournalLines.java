package io.gpusched.accounting.adversarial.durability;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * An independent reader of accounting journals, by the documented format (docs/ACCOUNTING.md: a line is the CRC-32C
 * of its JSON in 8 hex digits, a space, the JSON): it shares no code with the store's reader or writer. A line that
 * does not check is an error here, not a skipped record: a store that acknowledged a write never leaves one.
 */
final class JournalLines {
    private static final ObjectMapper JSON = new ObjectMapper();

    private JournalLines() {
    }

    /**
     * @param text    a journal's bytes
     * @param partial whether a last line without its newline (a torn write) is allowed: it is then left out
     * @return every complete line's JSON, in file order
     * @throws AssertionError for a line that is not a valid record
     */
    static List<JsonNode> parse(String text, boolean partial) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        int end = text.lastIndexOf('\n');
        if (end != text.length() - 1 && !partial) {
            throw new AssertionError("a torn last line: " + text.substring(end + 1));
        }
        if (end < 0) {
            return out;
        }
        int lineNo = 0;
        for (String line : text.substring(0, end + 1).split("\n", -1)) {
            lineNo++;
            if (line.isEmpty()) {
                continue;
            }
            if (line.length() < 10 || line.charAt(8) != ' ') {
                throw new AssertionError("line " + lineNo + " is not a record: " + line);
            }
            byte[] json = line.substring(9).getBytes(StandardCharsets.UTF_8);
            CRC32C c = new CRC32C();
            c.update(json, 0, json.length);
            if (!line.substring(0, 8).equals(String.format("%08x", c.getValue()))) {
                throw new AssertionError("line " + lineNo + " fails its checksum: " + line);
            }
            out.add(JSON.readTree(json));
        }
        return out;
    }

    /** @return every record of every journal ({@code *.log}) in the store directory, each file in file order */
    static List<JsonNode> all(Path store) throws IOException {
        List<JsonNode> out = new ArrayList<>();
        if (!Files.isDirectory(store)) {
            return out;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(store, "*.log")) {
            for (Path f : ds) {
                out.addAll(parse(Files.readString(f, StandardCharsets.UTF_8), false));
            }
        }
        return out;
    }

    /** @return whether a record is an allocation's interval */
    static boolean interval(JsonNode n) {
        return "i".equals(n.path("k").asText());
    }
}
