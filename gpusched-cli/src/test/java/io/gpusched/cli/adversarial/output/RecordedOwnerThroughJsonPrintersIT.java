package io.gpusched.cli.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.adversarial.JarRun;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * README: "What is printed is escaped ... (JSON output as backslash-u escapes), so nothing a node file or a request
 * holds can move the cursor, set the title or add a line". Owners are bounded where they enter since issue 36, but a
 * ledger written before that still opens with its owners as recorded (LedgerRecord: "as recorded: a ledger written
 * before the bounds on owners, job ids and labels still opens"), so every printer must escape them. The test writes
 * such a ledger the way an older gpusched did (an allocation record whose owner holds U+202E, a bidirectional
 * override, and U+009B, the C1 control sequence introducer; the record's checksum recomputed as the documented
 * format says), then prints it with each command that shows the allocation as JSON.
 */
@Tag("adversarial")
class RecordedOwnerThroughJsonPrintersIT {
    private static final String PLACEHOLDER = "ownerplaceholderxyz";
    /** The owner as an older gpusched recorded it: JSON text escapes in the file (the file stays ASCII). */
    private static final String HOSTILE_JSON = "evil\\u202e\\u009b2Jowner";

    @TempDir
    Path tmp;

    private JarRun.Result g(String... args) throws Exception {
        String[] all = new String[args.length + 4];
        all[0] = "--simulate";
        all[1] = "dgx1-v100";
        all[2] = "--state-dir";
        all[3] = tmp.resolve("state").toString();
        System.arraycopy(args, 0, all, 4, args.length);
        return JarRun.run(tmp, all);
    }

    /** Allocates one GPU for PLACEHOLDER, then makes its recorded owner the hostile one; returns the id. */
    private String allocationWithARecordedHostileOwner() throws Exception {
        JarRun.Result a = g("--json", "allocate", "--gpu=1", "--owner", PLACEHOLDER, "--lease=1h");
        assertThat(a.exit()).as(a.err()).isZero();
        Matcher id = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"").matcher(a.out());
        assertThat(id.find()).as(a.out()).isTrue();
        Path ledger;
        try (Stream<Path> s = Files.walk(tmp.resolve("state"))) {
            ledger = s.filter(p -> p.getFileName().toString().equals("ledger")).findFirst().orElseThrow();
        }
        List<String> lines = new ArrayList<>(Files.readAllLines(ledger, StandardCharsets.UTF_8));
        boolean changed = false;
        for (int i = 1; i < lines.size(); i++) {
            String line = lines.get(i);
            if (!line.contains(PLACEHOLDER)) {
                continue;
            }
            int sp1 = line.indexOf(' ');
            int sp2 = line.indexOf(' ', sp1 + 1);
            String seq = line.substring(0, sp1);
            String json = line.substring(sp2 + 1).replace(PLACEHOLDER, HOSTILE_JSON);
            CRC32C c = new CRC32C();
            c.update((seq + " " + json).getBytes(StandardCharsets.UTF_8));
            lines.set(i, seq + " " + String.format(Locale.ROOT, "%08x", c.getValue()) + " " + json);
            changed = true;
        }
        assertThat(changed).as("the allocation record in " + ledger).isTrue();
        Files.writeString(ledger, String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
        // the ledger opens and shows the recorded owner (escaped) in status: the setting of the attack
        JarRun.Result st = g("--json", "status");
        assertThat(st.exit()).as(st.err()).isZero();
        assertThat(st.out()).contains("evil");
        return id.group(1);
    }

    private static void assertNoRawHostileCharacters(JarRun.Result r, String what) {
        assertThat(r.exit()).as(what + ": " + r.err()).isZero();
        assertThat(r.out()).as(what + " printed the recorded owner").contains("evil");
        assertThat(r.out().indexOf('\u202e')).as(what + " printed a raw U+202E (bidirectional override): " + r.out())
                .isEqualTo(-1);
        assertThat(r.out().indexOf('\u009b')).as(what + " printed a raw U+009B (C1 CSI): " + r.out()).isEqualTo(-1);
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void statusJsonEscapesARecordedOwner() throws Exception {
        allocationWithARecordedHostileOwner();
        assertNoRawHostileCharacters(g("--json", "status"), "status --json");
        assertNoRawHostileCharacters(g("status"), "status");
    }

    @Test
    @Execution(ExecutionMode.CONCURRENT)
    void renewJsonEscapesARecordedOwner() throws Exception {
        String id = allocationWithARecordedHostileOwner();
        assertNoRawHostileCharacters(g("--json", "renew", id, "--lease=2h"), "renew --json");
    }
}
