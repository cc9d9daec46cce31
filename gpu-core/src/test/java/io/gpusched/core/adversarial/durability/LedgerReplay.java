package io.gpusched.core.adversarial.durability;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An independent reader of a node ledger file, written from its documented format (header line, then
 * {@code <sequence> <crc32c> <json>} lines) without any of the library's code: the set of allocation ids an
 * {@code "op":"A"} record made live and no {@code "op":"R"} record released. Snapshot records (after compaction)
 * are not understood: the tests that use it keep the ledger below the compaction threshold.
 */
final class LedgerReplay {
    private static final Pattern OP = Pattern.compile("\"op\"\\s*:\\s*\"([A-Za-z]+)\"");
    private static final Pattern ID = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"");

    /** The replayed file. */
    record Result(Set<String> live, List<Long> sequences, int records, boolean tornTail) {
    }

    private LedgerReplay() {
    }

    static Result replay(Path file) throws IOException {
        String text = new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
        boolean torn = !text.isEmpty() && !text.endsWith("\n");
        String[] lines = text.split("\n", -1);
        Set<String> live = new LinkedHashSet<>();
        List<Long> seqs = new ArrayList<>();
        int n = 0;
        for (int i = 1; i < lines.length; i++) {
            String l = lines[i];
            if (l.isEmpty() || (i == lines.length - 1 && torn)) {
                continue;
            }
            String[] f = l.split(" ", 3);
            seqs.add(Long.parseLong(f[0]));
            n++;
            Matcher op = OP.matcher(f[2]);
            Matcher id = ID.matcher(f[2]);
            if (!op.find() || !id.find()) {
                continue;
            }
            if (op.group(1).equals("A")) {
                live.add(id.group(1));
            } else if (op.group(1).equals("R")) {
                live.remove(id.group(1));
            }
        }
        return new Result(live, seqs, n, torn);
    }
}
