package io.gpusched.service;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.gpusched.isolation.JobSpec;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The request bodies any local user can send the node service, under coverage-guided fuzzing (docs/FUZZING.md). Each
 * parser returns, or throws {@link IllegalArgumentException} with a printable message naming what is wrong; never
 * another exception, an error or a hang. A job body that parses also makes a {@link JobSpec} (as the service does
 * before switching to the user), which keeps the same contract. Under {@code ./mvnw verify} each method runs over its
 * committed inputs ({@code src/test/resources/io/gpusched/service/ServiceParsersFuzzTestInputs/<method>/}).
 */
class ServiceParsersFuzzTest {

    /** A parser's answer broke its contract. */
    static final class Violation extends AssertionError {
        private static final long serialVersionUID = 1L;

        Violation(String m, Throwable cause) {
            super(m, cause);
        }
    }

    private interface Parse {
        void run(byte[] input);
    }

    private static void contract(byte[] input, Parse p) {
        try {
            p.run(input);
        } catch (IllegalArgumentException e) {
            String m = e.getMessage();
            if (m == null || m.isBlank()) {
                throw new Violation("a refusal without a message, for " + show(input), e);
            }
            if (m.chars().anyMatch(c -> c < 0x20 && c != '\n' || c == 0x7f)) {
                throw new Violation("a refusal with a control character in its message: " + show(m.getBytes(
                        StandardCharsets.UTF_8)), e);
            }
        } catch (RuntimeException | StackOverflowError | OutOfMemoryError e) {
            throw new Violation(e.getClass().getName() + " for " + show(input), e);
        }
    }

    private static String show(byte[] input) {
        String s = new String(input, StandardCharsets.UTF_8);
        return "\"" + (s.length() > 300 ? s.substring(0, 300) + "..." : s).replaceAll("\\p{Cntrl}", "?") + "\"";
    }

    @FuzzTest
    void allocationBody(byte[] input) {
        contract(input, Requests::allocate);
    }

    @FuzzTest
    void jobBody(byte[] input) {
        contract(input, b -> {
            Requests.Job j = Requests.job(b);
            new JobSpec(j.argv(), j.env(), Path.of(j.cwd()), 1000, 1000, "alice", Optional.empty());
        });
    }

    @FuzzTest
    void smallBodies(byte[] input) {
        contract(input, Requests::lease);
        contract(input, Requests::signal);
        contract(input, Requests::reason);
    }
}
