package io.gpusched.service.adversarial.review49;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
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
 * docs/SERVICE.md, Jobs: a client that stops reading "never holds back the job's end ... Its remaining output and then
 * the exit line wait for the client, in order", and the relays' 10 s after the end count only their work: "the time
 * the output waits for room at the client does not count: what the pipe held when the job ended is read at once, so a
 * paused client still gets all of it".
 *
 * <p>review10's ClientPausedAtTheEndAttackTest proves that for a job that runs 3 s, shorter than the heartbeat (5 s).
 * Here the job runs 9 s. StreamSink.line folds and clears {@code roomWaitSince[0]} (stdout's wait under way) in its
 * {@code finally} for every line that goes through it, the driver's too: the heartbeat (stream 0, onlyIfIdle) clears it
 * while the stdout relay is still blocked in {@code lock.wait()} for room, and returns without {@code notifyAll}, so the
 * relay never sets it again. From then on, its wait is not counted as a wait: once the job ends, its whole wait for the
 * paused client counts as work, the driver lets it go after 10 s (its line in hand and the pipe's rest lost) and gives
 * the exit line. The client reads again 15 s after the end: output missing, the exit line right after what was queued.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class HeartbeatHidesAPausedClientsWaitAttackTest {

    @Test
    void aPausedClientOfAJobThatRanPastAHeartbeatGetsAllItsOutputThenTheExitLine(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            // the service's default heartbeat (5 s): a job that runs 9 s gets one while its client is paused
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Process client = Clients.attached(bed, alice, Clients.jobBody(home, List.of("/bin/sh", "-c",
                    "seq 1 100000000 | timeout 9 tee copy.txt; exit 0")));
            try {
                String job = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> !Clients.running(s).contains(job), 90)).as("job %s ended", job)
                        .isTrue();
                Thread.sleep(15_000); // still not reading: past the relays' 10 s after the end
                byte[] raw = Clients.readAll(client, 90);
                Clients.Ndjson got = Clients.Ndjson.of(raw);
                byte[] wrote = Files.readAllBytes(home.resolve("copy.txt"));
                String summary = got.summary();
                int exit = got.types().indexOf("exit");
                assertThat(exit).as("an exit line (stream: %s)", summary).isGreaterThanOrEqualTo(0);
                assertThat(got.types().subList(exit + 1, got.types().size())).as("lines after the exit line (stream:"
                        + " %s)", summary).isEmpty();
                assertThat(got.stdout().length).as("bytes of stdout a client paused over the job's end (the job ran"
                        + " past a heartbeat) got, once it read again, of the %d the job wrote: all of them expected"
                        + " before the exit line (stream: %s)", wrote.length, summary)
                        .isGreaterThanOrEqualTo(wrote.length);
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
