package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Signals and a kill grace with a client that does not read. A job its owner KILLs through
 * {@code POST /api/v1/jobs/ID/signal} while its client stalls has ended: its GPU must be released without the client
 * (docs/SERVICE.md: the client "never holds back the job's end"). A job that ignores TERM, cancelled while its client
 * stalls: the cancel's answer comes once the job was KILLed after the grace and its GPU released. A job that ends by
 * itself while its client stalls: its GPU is released without the client.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SignalsToAStalledJobAttackTest {
    /**
     * The driver's heartbeat in the tests that set one (the service's default is 5 s; 100 ms is the least it takes):
     * the stalls below are as many heartbeats long as before, in less time.
     */
    private static final Duration HEARTBEAT = Duration.ofMillis(250);

    @Test
    void aJobKilledBySignalReleasesItsGpuWhileItsClientStalls(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            bed.heartbeat = HEARTBEAT; // the driver's heartbeats come every 250 ms, not every 5 s
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/usr/bin/yes", "gpusched")));
            try {
                String job = Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                Thread.sleep(HEARTBEAT.multipliedBy(5).dividedBy(2).toMillis()); // past two heartbeats while stalled
                ServiceBed.Answer a = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                        "--data-binary", "{\"signal\":\"KILL\"}", "http://localhost/api/v1/jobs/" + job + "/signal");
                assertThat(a.status()).as("alice's KILL: %s", a.body()).isEqualTo(200);
                boolean released = Clients.await(() -> Clients.held(bed).isEmpty(), 30);
                assertThat(released).as("GPU released after the KILL, client still stalled (held %s, job %s)", Clients
                        .held(bed), Clients.job(s, job)).isTrue();
                assertThat(Clients.job(s, job).get("state")).isEqualTo("KILLED");
                assertThat(Clients.jobCgroups(bed.jobParent)).isEmpty();
                assertThat(client.isAlive()).as("the client is still there, not reading").isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    @Test
    void aJobIgnoringTermIsKilledAfterTheGraceWhileItsClientStalls(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(2))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "trap '' TERM; exec yes gpusched")));
            try {
                String job = Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                ServiceBed.Answer a = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job);
                assertThat(a.status()).as("alice's cancel: %s", a.body()).isEqualTo(200);
                assertThat(Clients.JSON.readTree(a.body()).path("state").asText()).as("the cancel's answer: %s", a
                        .body()).isEqualTo("CANCELLED");
                assertThat(Clients.held(bed)).as("GPU held once the cancel returned").isEmpty();
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroup once the cancel returned").isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    @Test
    void aJobThatEndsByItselfReleasesItsGpuWhileItsClientStalls(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            // the job stalls for most of its 4 s, past a dozen heartbeats (it ran 8 s at the default 5 s heartbeat:
            // one heartbeat while stalled)
            bed.heartbeat = HEARTBEAT;
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "timeout 4 yes gpusched; exit 0")));
            try {
                String job = Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                boolean released = Clients.await(() -> Clients.held(bed).isEmpty(), 60);
                assertThat(released).as("GPU released once the job ended, its client still stalled (held %s, job %s)",
                        Clients.held(bed), Clients.job(s, job)).isTrue();
                assertThat(Clients.job(s, job).get("state")).isEqualTo("EXITED");
                assertThat(client.isAlive()).as("the client is still there, not reading").isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
