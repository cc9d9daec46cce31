package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
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
 * What a client that reads normally gets now that the allocation is released before the exit line and the driver
 * waits on the process itself: every byte of a job that prints a lot then exits, in order, then {@code exit} last with
 * the job's code; and a job whose main process exits while a child it forked keeps the stdout pipe open ends at once
 * (docs/SERVICE.md: however a job ends, its cgroup's processes are ended), not when the child lets the pipe go.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class AttachedOutputAttackTest {

    @Test
    void aJobPrintingALotThenExitingIsRelayedWholeAndInOrderBeforeItsExit(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "seq 1 1500000; exit 4")));
            try {
                Clients.Ndjson got = Clients.Ndjson.of(Clients.readAll(client, 120));
                StringBuilder want = new StringBuilder();
                for (int i = 1; i <= 1_500_000; i++) {
                    want.append(i).append('\n');
                }
                byte[] w = want.toString().getBytes(StandardCharsets.US_ASCII);
                String summary = got.summary();
                assertThat(got.types()).as("the stream: %s", summary).isNotEmpty();
                assertThat(got.types().get(got.types().size() - 1)).as("the last line (stream: %s)", summary)
                        .isEqualTo("exit");
                assertThat(got.types().indexOf("exit")).as("one exit line, last (stream: %s)", summary)
                        .isEqualTo(got.types().size() - 1);
                assertThat(got.lines().get(got.lines().size() - 1).path("code").asInt()).as("exit code").isEqualTo(4);
                assertThat(got.stdout().length).as("stdout bytes relayed").isEqualTo(w.length);
                assertThat(got.stdout()).as("stdout relayed whole and in order").isEqualTo(w);
                assertThat(Clients.await(() -> Clients.held(bed).isEmpty(), 30)).as("GPU released, held %s",
                        Clients.held(bed)).isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    @Test
    void aChildHoldingTheStdoutPipeDoesNotHoldTheJobsEnd(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "(sleep 600 &); (setsid sleep 700 &); echo main-done; exit 5")));
            try {
                Clients.Ndjson got = Clients.Ndjson.of(Clients.readAll(client, 60));
                String summary = got.summary();
                assertThat(got.types()).as("the stream ended with the job's main process (stream: %s)", summary)
                        .isNotEmpty();
                assertThat(got.types().get(got.types().size() - 1)).as("last line (stream: %s)", summary).isEqualTo(
                        "exit");
                assertThat(got.lines().get(got.lines().size() - 1).path("code").asInt()).as("exit code").isEqualTo(5);
                assertThat(new String(got.stdout(), StandardCharsets.UTF_8)).isEqualTo("main-done\n");
                assertThat(Clients.await(() -> Clients.held(bed).isEmpty(), 30)).as("GPU released, held %s",
                        Clients.held(bed)).isTrue();
                assertThat(Clients.jobCgroups(bed.jobParent)).as("the job's cgroup (and its sleeps) gone").isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
