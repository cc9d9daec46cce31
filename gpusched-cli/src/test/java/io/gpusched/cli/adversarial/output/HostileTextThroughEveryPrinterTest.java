package io.gpusched.cli.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 item 3: text a node or a request carries (device UUIDs and names, owners, job ids, labels, a backend's
 * name) reaches every printer of the command, from a stand-in inventory that reports hostile values ({@link
 * HostileStandIn}: a UUID with a newline and a line for a shell, terminal escapes, a right-to-left override, shell
 * quotes) and from a node ledger written before identifiers were bounded. Whatever layer stops a value, what reaches
 * the terminal must be safe ({@link TerminalSafety}, an independent judge), no hostile value may become a line of its
 * own, and {@code allocate --format env|docker|cdi} must be safe for a shell to {@code eval}: checked by bash itself.
 */
@Tag("adversarial")
class HostileTextThroughEveryPrinterTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;
    private List<String> base;

    @BeforeEach
    void standIn() throws Exception {
        System.setProperty(HostileStandIn.PROPERTY, "on");
        Path config = dir.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  backends: [" + HostileStandIn.NAME + "]\n");
        base = List.of("--config", config.toString(), "--state-dir", dir.resolve("state").toString());
    }

    @AfterEach
    void off() {
        System.clearProperty(HostileStandIn.PROPERTY);
    }

    /** @return {@code r}, after checking that its output is safe and holds no injected line */
    private static Run.Result safe(String what, Run.Result r) {
        assertThat(TerminalSafety.unsafe(r.out())).as("%s: unsafe characters on stdout:%n%s", what, r.out())
                .isEmpty();
        assertThat(TerminalSafety.unsafe(r.err())).as("%s: unsafe characters on stderr:%n%s", what, r.err())
                .isEmpty();
        assertThat(r.both().lines()).as(what).noneMatch(l -> l.strip().startsWith(HostileStandIn.INJECTED));
        return r;
    }

    private int live() throws Exception {
        Run.Result s = Run.gpusched(base, "status", "--json");
        assertThat(s.exit()).as(s.err()).isZero();
        return JSON.readTree(s.out()).path("allocations").size();
    }

    @Test
    void nodeFactsAreEscapedByEveryPrinter() {
        Run.Result list = safe("list", Run.gpusched(base, "list"));
        assertThat(list.exit()).as(list.err()).isZero();
        // shown, not dropped: the hostile name is there, made harmless
        assertThat(list.out()).contains("Tesla").contains("pwned").contains("A10");
        safe("list --json", Run.gpusched(base, "list", "--json"));
        safe("topo", Run.gpusched(base, "topo"));
        safe("watch", Run.gpusched(base, "watch", "--count", "1", "--no-ansi"));
        for (int gpu = 0; gpu < HostileStandIn.UUIDS.size(); gpu++) {
            Run.Result a = safe("allocate --devices=" + gpu, Run.gpusched(base, "allocate", "--devices=" + gpu));
            assertThat(a.exit()).as(a.err()).isZero();
        }
        Run.Result status = safe("status", Run.gpusched(base, "status"));
        assertThat(status.out()).contains("Backend " + HostileStandIn.NAME);
        safe("doctor", Run.gpusched(base, "doctor"));
    }

    /** The files gpusched writes for other programs name the backend in a comment: one line, escaped. */
    @Test
    void exportsNameTheBackendSafely() {
        Run.Result cdi = safe("export cdi", Run.gpusched(base, "export", "cdi"));
        assertThat(cdi.exit()).as(cdi.err()).isZero();
        Run.Result gres = safe("export slurm", Run.gpusched(base, "export", "slurm", "--cores", "none"));
        assertThat(gres.exit()).as(gres.err()).isZero();
        assertThat(cdi.out().lines().filter(l -> l.contains(HostileStandIn.NAME))).hasSize(1)
                .allMatch(l -> l.startsWith("#"));
        assertThat(gres.out().lines().filter(l -> l.contains(HostileStandIn.NAME))).hasSize(1)
                .allMatch(l -> l.startsWith("#"));
    }

    /**
     * {@code --format env} is for {@code eval}: bash reads it back and must get exactly the allocation's UUIDs, with no
     * variable set that the output did not name, no command run (no file made by the quoting attack); a value no
     * shell line can carry is refused with nothing printed and nothing left allocated.
     */
    @Test
    void formatEnvIsSafeToEval() throws Exception {
        for (int gpu = 0; gpu < HostileStandIn.UUIDS.size(); gpu++) {
            String uuid = HostileStandIn.UUIDS.get(gpu);
            int before = live();
            Run.Result r = safe("--format env " + gpu, Run.gpusched(base, "allocate", "--devices=" + gpu,
                    "--format", "env"));
            if (r.exit() != 0) {
                assertThat(r.out()).as("refused, so nothing for a shell").isEmpty();
                assertThat(r.err().strip().lines()).as(r.err()).hasSize(1);
                assertThat(live()).as("a refusal leaves nothing allocated").isEqualTo(before);
                continue;
            }
            Run.Result sh = Run.bash(dir, "eval \"$1\"; printf '%s\\n%s' \"${LD_PRELOAD-unset}\""
                    + " \"$CUDA_VISIBLE_DEVICES\"", r.out());
            assertThat(sh.exit()).as(sh.err()).isZero();
            assertThat(sh.out()).isEqualTo("unset\n" + uuid);
            assertThat(dir.resolve("gpusched-pwned")).doesNotExist();
        }
        // the plain UUID must be printable as it is: KEY=VALUE, as docker's --env-file reads it
        Run.Result plain = Run.gpusched(base, "allocate", "--devices=3", "--format", "env");
        if (plain.exit() == 0) {
            assertThat(plain.out()).contains("CUDA_VISIBLE_DEVICES=GPU-3333\n");
        }
    }

    /** {@code gpusched env} (a YARN container's environment, for {@code eval}): safe for a shell and a terminal. */
    @Test
    void yarnContainerEnvIsSafeToEval() throws Exception {
        for (int gpu = 0; gpu < HostileStandIn.UUIDS.size(); gpu++) {
            String container = "container_1700000000000_0001_01_00000" + gpu;
            Run.Result a = Run.gpusched(base, "allocate", "--devices=" + gpu, "--label=yarn.container=" + container);
            assertThat(a.exit()).as(a.err()).isZero();
            Run.Result r = safe("env " + gpu, Run.gpusched(base, "env", "--container", container));
            if (r.exit() != 0) {
                assertThat(r.out()).as("refused, so nothing for a shell").isEmpty();
                continue;
            }
            Run.Result sh = Run.bash(dir, "eval \"$1\"; printf '%s\\n%s' \"${LD_PRELOAD-unset}\""
                    + " \"$CUDA_VISIBLE_DEVICES\"", r.out());
            assertThat(sh.exit()).as(sh.err()).isZero();
            assertThat(sh.out()).isEqualTo("unset\n" + HostileStandIn.UUIDS.get(gpu));
            assertThat(dir.resolve("gpusched-pwned")).doesNotExist();
        }
    }

    /** {@code --format docker} and {@code cdi}: one line of words; bash splits it into exactly the words meant. */
    @Test
    void formatDockerAndCdiAreSafeForAShell() throws Exception {
        for (String format : List.of("docker", "cdi")) {
            for (int gpu = 0; gpu < HostileStandIn.UUIDS.size(); gpu++) {
                int before = live();
                Run.Result r = safe("--format " + format + " " + gpu, Run.gpusched(base, "allocate",
                        "--devices=" + gpu, "--format", format));
                if (r.exit() != 0) {
                    assertThat(r.out()).isEmpty();
                    assertThat(live()).isEqualTo(before);
                    continue;
                }
                assertThat(r.out().strip().lines()).hasSize(1);
                Run.Result sh = Run.bash(dir, "eval \"set -- $1\"; printf '%s\\n' \"$@\"", r.out());
                assertThat(sh.exit()).as(sh.err()).isZero();
                assertThat(sh.out().lines().toList()).as(format).contains("-e",
                        "CUDA_VISIBLE_DEVICES=" + HostileStandIn.UUIDS.get(gpu));
                assertThat(dir.resolve("gpusched-pwned")).doesNotExist();
            }
        }
    }

    /**
     * Owners, job ids and labels are bounded where they enter: a terminal escape or an over-long value is refused
     * naming the field, the refusal itself printed safely, and nothing is allocated.
     */
    @Test
    void hostileIdentifiersAreRefusedWhereTheyEnter() throws Exception {
        List<List<String>> bad = List.of(List.of("--owner=\u001b[2J"), List.of("--owner=\u001b]0;pwned\u0007"),
                List.of("--owner=a\nb"), List.of("--owner=" + "o".repeat(129)), List.of("--job=\u009b31m"),
                List.of("--job=" + "j".repeat(257)), List.of("--label=k=v\u202eevil"),
                List.of("--label=" + "k".repeat(64) + "=v"), List.of("--label=k=" + "v".repeat(257)),
                List.of("--owner=\u001b"));
        for (List<String> flags : bad) {
            List<String> args = new ArrayList<>(List.of("allocate", "--devices=3"));
            args.addAll(flags);
            Run.Result r = safe(flags.toString(), Run.gpusched(base, args.toArray(String[]::new)));
            assertThat(r.exit()).as("%s: %s", flags, r.out()).isEqualTo(2);
            assertThat(r.err()).as(flags.toString()).containsAnyOf("owner", "job id", "label");
        }
        List<String> many = new ArrayList<>(List.of("allocate", "--devices=3"));
        for (int i = 0; i < 65; i++) {
            many.add("--label=k" + i + "=v");
        }
        assertThat(safe("65 labels", Run.gpusched(base, many.toArray(String[]::new))).err()).contains("64 labels");
        // the bounds themselves are accepted
        Run.Result ok = Run.gpusched(base, "allocate", "--devices=3", "--owner=" + "o".repeat(128),
                "--job=" + "j".repeat(256), "--label=" + "k".repeat(63) + "=" + "v".repeat(256), "--owner=x");
        assertThat(ok.exit()).as("--owner twice is a usage error").isEqualTo(2);
        ok = Run.gpusched(base, "allocate", "--devices=3", "--owner=" + "o".repeat(128), "--job=" + "j".repeat(256),
                "--label=" + "k".repeat(63) + "=" + "v".repeat(256), "--label=empty=");
        assertThat(ok.exit()).as(ok.err()).isZero();
        assertThat(live()).isEqualTo(1);
    }

    /**
     * A backend that reports a UUID holding a newline and a shell line, terminal escapes and a right-to-left override
     * is refused where its devices enter the scheduler (issue 36): every command that needs the scheduler says so in
     * one escaped line naming the device; {@code list}, which only reads, shows the devices escaped.
     */
    @Test
    void aBackendReportingHostileIdentifiersIsRefusedSafely() {
        System.setProperty(HostileStandIn.PROPERTY, "raw");
        safe("raw list", Run.gpusched(base, "list"));
        for (List<String> cmd : List.of(List.of("status"), List.of("allocate", "--gpu=1"))) {
            Run.Result r = safe("raw " + cmd, Run.gpusched(base, cmd.toArray(String[]::new)));
            assertThat(r.exit()).as("%s: %s", cmd, r.err()).isNotZero();
            assertThat(r.err()).as(cmd.toString()).contains("device 0 uuid").contains("refused");
            assertThat(r.err().strip().lines()).as(cmd.toString()).hasSize(1);
        }
    }

    /** Errors quote what the user typed: escaped, one line. */
    @Test
    void errorMessagesAreEscaped() {
        for (List<String> args : List.of(List.of("release", "\u001b]0;pwned\u0007"), List.of("allocate",
                "--bogus\u001b[2J"), List.of("allocate", "--gpu=\u001b[2J"), List.of("allocate", "--devices=9\u0007"),
                List.of("allocate", "--target=\u001b[2J::1"), List.of("plan", dir.resolve("no\u001b[2J").toString()),
                List.of("allocate", "--format", "\u001b[2J"), List.of("allocate", "--cuda", "\u001b[2J"))) {
            Run.Result r = safe(args.toString(), Run.gpusched(base, args.toArray(String[]::new)));
            assertThat(r.exit()).as(args.toString()).isNotZero();
            assertThat(r.err().strip().lines()).as(args + ": " + r.err()).hasSize(1);
        }
    }

    /**
     * A node ledger written before the bounds (an owner with escapes and 300 characters, such a job id and label)
     * still opens, keeps the values exactly (status --json reads them back), and every printer shows them safely.
     */
    @Test
    void anOldLedgerWithHostileValuesOpensAndPrintsSafely() throws Exception {
        System.clearProperty(HostileStandIn.PROPERTY);
        List<String> sim = List.of("--simulate", "pcie-4xa10", "--state-dir", dir.resolve("old").toString());
        Run.Result a = Run.gpusched(sim, "allocate", "--devices=1", "--owner=OWNERMARK", "--job=JOBMARK",
                "--label=team=LABELMARK");
        assertThat(a.exit()).as(a.err()).isZero();
        String owner = "\u001b[2J\u001b]0;owned\u0007" + "o".repeat(300);
        String job = "job\nLD_PRELOAD=/tmp/x.so";
        String label = "\u202eevil" + "v".repeat(400);
        rewriteLedger(dir.resolve("old").resolve("ledger"), List.of("OWNERMARK", "JOBMARK", "LABELMARK"),
                List.of(json(owner), json(job), json(label)));
        Run.Result js = Run.gpusched(sim, "status", "--json");
        assertThat(js.exit()).as(js.err()).isZero();
        JsonNode held = JSON.readTree(js.out()).path("allocations").get(0);
        assertThat(held.path("owner").asText()).isEqualTo(owner);
        assertThat(held.path("jobId").asText()).isEqualTo(job);
        for (List<String> cmd : List.of(List.of("status"), List.of("list"), List.of("watch", "--count", "1",
                "--no-ansi"), List.of("allocate", "--devices=0"))) {
            Run.Result r = safe("old ledger: " + cmd, Run.gpusched(sim, cmd.toArray(String[]::new)));
            assertThat(r.exit()).as(cmd + ": " + r.err()).isZero();
        }
        assertThat(Run.gpusched(sim, "status").out()).contains("owned").contains("LD_PRELOAD");
        String id = held.path("id").asText();
        assertThat(Run.gpusched(sim, "release", id).exit()).isZero();
    }

    /** @return {@code s} as the JSON string body Jackson writes (without quotes) */
    private static String json(String s) throws Exception {
        String q = JSON.writeValueAsString(s);
        return q.substring(1, q.length() - 1);
    }

    /**
     * Rewrites record lines as an older gpusched would have written them: each mark replaced, each line's CRC-32C
     * over {@code "<seq> <json>"} computed again (the format's own rule, written out here independently).
     */
    static void rewriteLedger(Path ledger, List<String> marks, List<String> values) throws Exception {
        List<String> lines = Files.readAllLines(ledger, StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder(lines.get(0)).append('\n');
        int changed = 0;
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(" ", 3);
            String body = f[2];
            for (int i = 0; i < marks.size(); i++) {
                body = body.replace(marks.get(i), values.get(i));
            }
            changed += body.equals(f[2]) ? 0 : 1;
            CRC32C c = new CRC32C();
            c.update((f[0] + " " + body).getBytes(StandardCharsets.UTF_8));
            out.append(f[0]).append(' ').append(String.format(Locale.ROOT, "%08x", c.getValue())).append(' ')
                    .append(body).append('\n');
        }
        assertThat(changed).as("the marks were in the ledger").isPositive();
        Files.writeString(ledger, out.toString(), StandardCharsets.UTF_8);
    }
}
