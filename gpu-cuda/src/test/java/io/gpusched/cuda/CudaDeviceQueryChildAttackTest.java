package io.gpusched.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cuda.CudaDeviceQuery.Result;
import io.gpusched.cuda.CudaDeviceQuery.Status;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The query against children that misbehave with their stdout (fake children are shell scripts through the
 * package-private {@code query}, as in CudaDeviceQueryTest): a grandchild that keeps the pipe open after the child
 * answered and exited, one that escapes into its own session and writes forever, binary output, output without a
 * last newline. Each ends in its bounded time with an answer or a typed FAILED (the class's timeout would catch a
 * hang).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CudaDeviceQueryChildAttackTest {
    private static final String U = "GPU-0a1b2c3d-0001-4e5f-8a9b-00000000000a";

    private static Result sh(String script, int timeoutSeconds) {
        return CudaDeviceQuery.query(new ProcessBuilder("sh", "-c", script)
                .redirectError(ProcessBuilder.Redirect.DISCARD), Duration.ofSeconds(timeoutSeconds));
    }

    @Test
    void aGrandchildHoldingThePipeAfterTheAnswerDoesNotHoldTheQuery() {
        Result r = sh("echo 'count 1'; echo 'uuid " + U + "'; sleep 30 & exit 0", 20);
        assertThat(r.status()).as(r.toString()).isEqualTo(Status.ANSWERED);
        assertThat(r.uuids()).containsExactly(U);
    }

    @Test
    void aGrandchildWritingForeverAfterTheAnswerDoesNotHoldTheQuery() {
        // writes for as long as anyone reads: the loop ends at the first write the closed pipe refuses (a loop that
        // never ended went on spinning, reparented to init, for the rest of the suite and after it)
        Result r = sh("echo 'count 0'; (while head -c 65536 /dev/zero; do :; done) & exit 0", 20);
        assertThat(r.status()).as(r.toString()).isIn(Status.ANSWERED, Status.FAILED);
    }

    @Test
    void aWriterInItsOwnSessionEndsByTheTimeoutTyped() {
        Result r = sh("setsid sh -c 'yes escaped' & sleep 100", 3);
        assertThat(r.status()).isEqualTo(Status.FAILED);
        assertThat(r.message()).contains("did not answer within 3 s");
    }

    @Test
    void binaryOutputAndNoLastNewlineAreReadBounded() {
        Result bin = sh("head -c 2000000 /dev/urandom; printf '\\ncount 0\\n'", 20);
        assertThat(bin.status()).as(bin.toString()).isEqualTo(Status.ANSWERED);
        Result tail = sh("printf 'count 1\\nuuid " + U + "'", 20);
        assertThat(tail.status()).as(tail.toString()).isEqualTo(Status.ANSWERED);
        assertThat(tail.uuids()).containsExactly(U);
    }
}
