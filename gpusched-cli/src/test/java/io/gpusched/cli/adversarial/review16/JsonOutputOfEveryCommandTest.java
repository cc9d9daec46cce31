package io.gpusched.cli.adversarial.review16;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.cli.GpuschedCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review16: the global {@code --json} (README, "Global options"). With it, an error is a JSON document on standard
 * output ({@code {"error": ..., "exitCode": 2}}), allocate and renew print the allocation as JSON: a script reads
 * standard output as JSON whatever happens. {@code release} with {@code --json} prints the text line
 * {@code released <id>}: the one answer of the allocate / renew / release cycle a script cannot parse.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class JsonOutputOfEveryCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    record Result(int exit, String out, String err) {
    }

    private Result gpusched(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("GPUSCHED_SOCKET");
        String[] full = new String[args.length + 5];
        full[0] = "--simulate";
        full[1] = "dgx1-v100";
        full[2] = "--state-dir";
        full[3] = dir.resolve("state").toString();
        full[4] = "--json";
        System.arraycopy(args, 0, full, 5, args.length);
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), env).execute(full);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void releaseWithJsonPrintsJsonAsAllocateRenewAndEveryErrorDo() throws Exception {
        Result allocate = gpusched("allocate", "--gpu=1", "--lease", "1h");
        assertThat(allocate.exit()).as(allocate.err()).isZero();
        String id = JSON.readTree(allocate.out()).get("id").asText();

        Result renew = gpusched("renew", id, "--lease", "2h");
        assertThat(renew.exit()).as(renew.err()).isZero();
        assertThatCode(() -> JSON.readTree(renew.out())).as("renew --json").doesNotThrowAnyException();

        Result unknown = gpusched("release", "no-such-id");
        assertThat(unknown.exit()).isEqualTo(2);
        assertThat(JSON.readTree(unknown.out()).get("exitCode").asInt()).as("release's refusal, as JSON").isEqualTo(2);

        Result release = gpusched("release", id);
        assertThat(release.exit()).as(release.err()).isZero();
        JsonNode parsed = null;
        try {
            parsed = JSON.readTree(release.out());
        } catch (Exception e) {
            // left null: not JSON
        }
        assertThat(parsed != null && parsed.isObject()).as("`gpusched --json release %s` printed %s", id,
                release.out().strip()).isTrue();
    }
}
