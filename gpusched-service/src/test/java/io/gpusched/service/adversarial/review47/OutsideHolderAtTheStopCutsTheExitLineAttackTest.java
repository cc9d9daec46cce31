package io.gpusched.service.adversarial.review47;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md, the stop: "The service stops before the console: a waiting client gets its 503, an attached job's
 * client its exit line, and the console lets every answer in progress finish (up to 5 s together ...) before it closes
 * the connections (a client that does not read gets its line only if it reads within them)". And, Jobs: "A job that
 * hands its stdout or stderr to a process outside it (over a Unix socket) cannot keep the service reading".
 *
 * <p>alice's attached job hands its stdout to a process outside it (root here, through /proc/PID/fd/1, as a descriptor
 * passed over SCM_RIGHTS would), which holds it and writes nothing. Her client reads everything as it comes. The
 * service stops (as gpusched serve does: the service, then the console). The stop ends the job at once, but its driver
 * then waits for the stdout relay until it has spent RELAY_WAIT (10 s) in reads of the held pipe: twice the console's
 * close grace. The console closes the connection at 5 s, and the client that read all along never gets its exit line.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class OutsideHolderAtTheStopCutsTheExitLineAttackTest {

    @Test
    void aReadingClientGetsItsExitLineAtTheStopThoughAProcessOutsideTheJobHoldsItsStdout(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "echo ready; exec sleep 600")));
            FileOutputStream held = null;
            try {
                Review47.Stream stream = new Review47.Stream(client, 1 << 20, 0);
                String job = Clients.awaitRunning(s, 60);
                String pid = Review47.awaitProcess(bed.jobParent, "sleep", 60);
                held = new FileOutputStream("/proc/" + pid + "/fd/1"); // held, silent
                assertThat(Clients.await(() -> new String(stream.kept(), StandardCharsets.US_ASCII).contains(
                        "\"type\":\"stdout\""), 30)).as("alice's client reads its job's first line").isTrue();
                long stopAt = System.nanoTime();
                s.stop();
                bed.console.close();
                stream.thread.join(TimeUnit.SECONDS.toMillis(60));
                long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopAt);
                Clients.Ndjson got = Clients.Ndjson.of(stream.kept());
                String summary = got.summary();
                System.out.printf("review47 stop with an outside holder: job %s, stream %s, ended %s %d ms after the"
                        + " stop came%n", job, summary, stream.ended, tookMs);
                assertThat(got.types()).as("alice's client read all along; at the service's stop her job ended, a"
                        + " process outside it holding its stdout (writing nothing); the docs promise an attached"
                        + " job's client its exit line at the stop, within the console's 5 s close grace; her stream"
                        + " (ended: %s, %d ms after the stop came) was: %s", stream.ended, tookMs, summary)
                        .contains("exit");
                assertThat(got.types().get(got.types().size() - 1)).as("the last line (stream: %s)", summary)
                        .isEqualTo("exit");
            } finally {
                if (held != null) {
                    held.close();
                }
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
