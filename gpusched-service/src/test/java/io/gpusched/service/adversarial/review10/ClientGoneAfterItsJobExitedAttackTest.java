package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A client that stalls while its job ends by itself, then goes without reading again. The job exited (its end is in
 * the audit, {@code job.end=EXITED}, its GPU released) while its stdout relay waited in {@code StreamSink.line} for
 * room; when the client goes, the writer fails, the relay's wait ends with "the client has gone" and the relay calls
 * {@code Jobs.clientGone}, which (the job's {@code cancelled} being unset, as for any job that exited) audits
 * {@code job.client-gone} "ending ... TERM, KILL after ..." for a job that ended long before, and TERMs it again. The
 * audit must not say an exited job is being ended because its client went (docs/SERVICE.md: that is for a client
 * whose connection closes "before the job ends").
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ClientGoneAfterItsJobExitedAttackTest {

    @Test
    void aClientGoingAfterItsJobExitedIsNotAuditedAsEndingTheJob(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "timeout 4 yes gpusched; exit 0")));
            try {
                String job = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> !Clients.running(s).contains(job), 60)).as("job %s ended", job)
                        .isTrue();
                Map<String, Object> view = Clients.job(s, job);
                assertThat(view.get("state")).as("job %s: %s", job, view).isEqualTo("EXITED");
                assertThat(Clients.await(() -> Clients.held(bed).isEmpty(), 30)).as("GPU released, held %s", Clients
                        .held(bed)).isTrue();
                String relay = "gpusched-job-out-" + job;
                assertThat(Clients.threads(relay)).as("the stdout relay of %s still waits for the stalled client"
                        + " (precondition: the output was held back at the exit)", job).isNotEmpty();
                List<String> atTheEnd = Clients.audited(bed, job);

                client.destroyForcibly(); // the client goes without reading again
                client.waitFor(30, TimeUnit.SECONDS);
                assertThat(Clients.await(() -> Clients.threads(relay).isEmpty() && Clients.threads(
                        "gpusched-job-stream").isEmpty(), 30)).as("relay and writer gone once the client went: %s",
                                Clients.threadsIn("StreamSink"))
                        .isTrue();
                Thread.sleep(1000); // an ender it may have started
                List<String> audited = Clients.audited(bed, job);
                assertThat(audited).as("audit.log lines of job %s (at its end: %s)", job, atTheEnd).noneMatch(l -> l
                        .startsWith("job.client-gone"));
                assertThat(Clients.job(s, job).get("state")).as("job %s's state", job).isEqualTo("EXITED");
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
