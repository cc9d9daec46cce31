package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A client that pauses (a paused terminal, {@code | less}) when its job ends, then reads again. docs/SERVICE.md: a
 * client that stops reading "holds back the job's output ... it never holds back the job's end ... and the exit line
 * waits for the client": the stream is the job's output, then {@code exit}, last. The job's driver waits only 10 s for
 * the output relays (Jobs.run, {@code t.join(10 s)}), then writes the exit line while the stdout relay is still blocked
 * in its write with the rest of the output (the pipe's 64 KiB, drained by the JDK at the exit) still to come: once the
 * client reads again, the exit line goes out before that output, or the answer is closed after it and the output is
 * lost. alice's job copies {@code seq} to its stdout and to a file ({@code tee}) until {@code timeout} ends it 3 s in,
 * so the file says what it wrote; her client does not read for 15 s after the job ended, then reads everything.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class ClientPausedAtTheEndAttackTest {

    @Test
    void aClientThatReadsAgainGetsAllTheOutputThenTheExitLine(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Process client = Clients.attached(bed, alice, Clients.jobBody(home, List.of("/bin/sh", "-c",
                    "seq 1 100000000 | timeout 3 tee copy.txt; exit 0")));
            try {
                String job = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> !Clients.running(s).contains(job), 60)).as("job %s ended", job)
                        .isTrue();
                Thread.sleep(15_000); // still not reading: past the driver's wait for its relays
                byte[] raw = Clients.readAll(client, 90);
                Clients.Ndjson got = Clients.Ndjson.of(raw);
                byte[] wrote = Files.readAllBytes(home.resolve("copy.txt"));
                String summary = got.summary();
                int exit = got.types().indexOf("exit");
                assertThat(exit).as("an exit line (stream: %s)", summary).isGreaterThanOrEqualTo(0);
                assertThat(got.types().subList(exit + 1, got.types().size())).as("lines after the exit line (stream:"
                        + " %s; job wrote %d bytes, the stream carried %d)", summary, wrote.length, got.stdout().length)
                        .isEmpty();
                assertThat(got.stdout().length).as("bytes of stdout the client got of the %d the job wrote (stream:"
                        + " %s)", wrote.length, summary).isGreaterThanOrEqualTo(wrote.length);
                assertThat(Arrays.equals(got.stdout(), 0, wrote.length, wrote, 0, wrote.length)).as("the stdout the"
                        + " client got begins with what the job wrote").isTrue();
                assertThat(isSeqPrefix(got.stdout())).as("the stdout is seq's output, in order, nothing left out")
                        .isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    /** @return whether {@code b} is a prefix of {@code seq 1 N}'s output */
    static boolean isSeqPrefix(byte[] b) {
        ByteArrayOutputStream want = new ByteArrayOutputStream(b.length + 16);
        for (long i = 1; want.size() < b.length; i++) {
            want.writeBytes((i + "\n").getBytes(StandardCharsets.US_ASCII));
        }
        return Arrays.equals(b, 0, b.length, want.toByteArray(), 0, b.length);
    }
}
