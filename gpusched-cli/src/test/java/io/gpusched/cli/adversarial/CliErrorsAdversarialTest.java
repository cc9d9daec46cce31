package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Errors of the gpusched command: non-zero exit, one line on stderr, and with --json a JSON document on stdout. */
@Tag("adversarial")
class CliErrorsAdversarialTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void everyFailingCommandWithJsonPrintsAJsonErrorAndExitsNonZero(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        List<List<String>> failing = List.of(List.of("allocate", "--gpu=99"), List.of("allocate", "--gpu=-1"),
                List.of("allocate", "--gpu=abc"), List.of("allocate", "--bogus"), List.of("release", "nope"),
                List.of("release"), List.of("allocate", "--gpu=1", "--lease=xyz"),
                List.of("allocate", "--label=noeq"), List.of("allocate", "--devices=7"),
                List.of("allocate", "--gpu-memory=lots"), List.of("run", "--no-isolation", "--", "/nonexistent/x"));
        for (List<String> args : failing) {
            // after "--" a --json belongs to run's command, so only the leading form applies there
            for (boolean before : args.contains("--") ? List.of(true) : List.of(true, false)) {
                List<String> all = new java.util.ArrayList<>(List.of("--simulate", "pcie-4xa10"));
                if (before) {
                    all.add(args.get(0));
                    all.add("--json");
                    all.addAll(args.subList(1, args.size()));
                } else {
                    all.addAll(args);
                    all.add("--json");
                }
                Cli.Result r = Cli.run(state, all.toArray(String[]::new));
                assertThat(r.exit()).as("%s", all).isNotZero();
                JsonNode n = JSON.readTree(r.out());
                assertThat(n).as("%s stdout %s", all, r.out()).isNotNull();
                assertThat(n.path("error").asText()).as("%s", all).isNotBlank();
                assertThat(n.path("exitCode").asInt()).as("%s", all).isEqualTo(r.exit());
                assertThat(r.err()).as("%s", all).isNotBlank();
            }
            // without --json: nothing on stdout, the error on stderr; execution errors are one line
            Cli.Result plain = Cli.run(state, concat(List.of("--simulate", "pcie-4xa10"), args));
            assertThat(plain.exit()).isNotZero();
            assertThat(plain.out()).as("%s", args).isEmpty();
            if (plain.err().startsWith("gpusched: ")) { // an execution error (not a usage error): its message is one line
                assertThat(plain.err().strip().lines().filter(l -> !l.startsWith("gpusched: isolation is off")))
                        .as("%s", args).hasSize(1);
            }
        }
        // nothing was allocated by any of them
        JsonNode status = JSON.readTree(Cli.run(state, "--simulate", "pcie-4xa10", "status", "--json").out());
        assertThat(status.path("allocations")).isEmpty();
    }

    @Test
    void everySubcommandAnswersHelp(@TempDir Path dir) {
        for (String sub : List.of("list", "topo", "allocate", "release", "status", "run", "doctor", "plan", "serve",
                "watch", "demo")) {
            for (String h : List.of("--help", "-h")) {
                Cli.Result r = Cli.run(dir, sub, h);
                assertThat(r.exit()).as(sub + " " + h + ": " + r.err()).isZero();
                assertThat(r.out()).as(sub).startsWith("Usage: gpusched " + sub);
            }
        }
    }

    static String[] concat(List<String> a, List<String> b) {
        List<String> all = new java.util.ArrayList<>(a);
        all.addAll(b);
        return all.toArray(String[]::new);
    }
}
