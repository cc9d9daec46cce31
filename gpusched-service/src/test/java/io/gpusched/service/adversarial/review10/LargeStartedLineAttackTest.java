package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * An attached job's end must never wait on its client (docs/SERVICE.md, Jobs: a client that stops reading "never holds
 * back the job's end: a cancel or the service's stop ends such a job and releases its GPUs at once"). The heartbeat
 * and the exit line no longer wait on a stalled client, but the {@code started} line is still written by the job's
 * driver itself, before it ever waits for the job's end (Jobs.run: {@code sink.started(job)}), and that line carries
 * the job's whole argv (the owner's view). alice's argv holds 170,000 bytes of U+0001 (2 arguments of 85,000: within
 * the request's 256 KiB of argv, its 1 MiB body and execve's limits), each escaped as 6 bytes (backslash, u, 0001) in
 * the JSON line: a started line of about 1 MB, more than the socket, curl and its pipe take in. Her client does not
 * read ({@code curl} whose stdout nobody reads, as {@code curl ... | sleep 600}): the write of the started line blocks
 * with the job already running, and the driver never reaches its wait. The job ends (by itself, by a cancel, by the stop) and its GPU
 * stays held.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class LargeStartedLineAttackTest {

    private static List<String> argv(String script) {
        List<String> a = new ArrayList<>(List.of("/bin/sh", "-c", script, "sh"));
        for (int i = 0; i < 2; i++) {
            a.add(Clients.repeat('\u0001', 85_000));
        }
        return a;
    }

    @Test
    void aJobThatExitsReleasesItsGpuWhileItsClientDoesNotRead(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), argv(
                    "exit 3")));
            try {
                String job = Clients.awaitRunning(s, 60);
                boolean released = Clients.await(() -> Clients.held(bed).isEmpty() && !Clients.running(s).contains(
                        job), 30);
                assertThat(released).as("job %s exited at once (exit 3), its client stalled: its GPU must be"
                        + " released; still held %s, job %s, processes left in its cgroup %s, threads in StreamSink %s",
                        job, Clients.held(bed), Clients.job(s, job).get("state"), Clients.jobProcesses(bed.jobParent),
                        Clients.threadsIn("StreamSink")).isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    @Test
    void aCancelReleasesTheGpuOfAJobWhoseStartedLineIsBlocked(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), argv(
                    "exec sleep 600")));
            try {
                String job = Clients.awaitRunning(s, 60);
                Thread.sleep(2_000);
                ServiceBed.Answer a = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job);
                assertThat(a.status()).as("alice's cancel").isEqualTo(200);
                String state = Clients.JSON.readTree(a.body()).path("state").asText();
                assertThat(Clients.held(bed)).as("allocations held once alice's cancel of %s returned (answered with"
                        + " the job %s; threads in StreamSink %s)", job, state, Clients.threadsIn("StreamSink"))
                        .isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    @Test
    void theStopReleasesTheGpuOfAJobWhoseStartedLineIsBlocked(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), argv(
                    "exec sleep 600")));
            try {
                String job = Clients.awaitRunning(s, 60);
                Thread.sleep(2_000);
                s.close();
                assertThat(Clients.held(bed)).as("allocations held once close() returned (job %s %s; threads in"
                        + " StreamSink %s)", job, Clients.job(s, job).get("state"), Clients.threadsIn("StreamSink"))
                        .isEmpty();
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroups left once close() returned").isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
