package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console's close grace (docs/SERVICE.md: the console "lets every answer in progress finish (up to 5 s together)
 * ... (a client that does not read gets its line only if it reads within them)"). A client that stalled and reads
 * again at once after the stop gets its stream's last line; a flood of new requests during the grace neither keeps
 * the console from closing nor gets anything granted.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class StopGraceAttackTest {

    @Test
    void aStalledClientThatReadsAgainAtTheStopGetsItsLastLine(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/usr/bin/yes", "gpusched")));
            Thread closer = null;
            try {
                Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                s.close();
                closer = new Thread(bed.console::close, "review10-console-close");
                closer.start();
                byte[] raw = Clients.readAll(client, 60); // reads again at once
                Clients.Ndjson got = Clients.Ndjson.of(raw);
                List<String> t = got.types();
                assertThat(t).as("the stream").isNotEmpty();
                assertThat(t.get(t.size() - 1)).as("the last line of alice's stream (%s)", got.summary()).isIn("exit",
                        "error");
            } finally {
                Clients.cleanUp(bed, alice, client);
                if (closer != null) {
                    closer.join(TimeUnit.SECONDS.toMillis(60));
                    bed.console = null;
                    bed.service = null;
                }
            }
        }
    }

    @Test
    void aFloodDuringTheGraceNeitherHoldsTheCloseNorIsGranted(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/usr/bin/yes", "gpusched")));
            AtomicBoolean stop = new AtomicBoolean();
            List<String> answers = Collections.synchronizedList(new ArrayList<>());
            List<Thread> flood = new ArrayList<>();
            try {
                Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                s.close();
                for (int i = 0; i < 6; i++) {
                    int n = i;
                    Thread t = new Thread(() -> {
                        while (!stop.get()) {
                            try {
                                ServiceBed.Answer a = n % 2 == 0 ? bed.curl(bob, "-X", "POST", "-H",
                                        "Content-Type: application/json", "--data-binary", "{\"flags\":[\"--gpu=1\"]}",
                                        "http://localhost/api/v1/allocations")
                                        : bed.curl(bob,
                                                "http://localhost/api/v1/jobs");
                                answers.add(a.status() + (a.status() == 201 ? " " + a.body() : ""));
                            } catch (Exception e) {
                                answers.add("no answer");
                                try {
                                    Thread.sleep(50);
                                } catch (InterruptedException ie) {
                                    return;
                                }
                            }
                        }
                    }, "review10-flood-" + i);
                    t.start();
                    flood.add(t);
                }
                Thread.sleep(500);
                CompletableFuture<Void> closed = CompletableFuture.runAsync(bed.console::close, r -> new Thread(r,
                        "review10-console-close").start());
                boolean done = Clients.await(closed::isDone, 60);
                assertThat(done).as("the console closed under a flood (%d answers so far)", answers.size()).isTrue();
                bed.console = null;
                bed.service = null;
                stop.set(true);
                for (Thread t : flood) {
                    t.join(TimeUnit.SECONDS.toMillis(90));
                }
                assertThat(answers).as("the flood was answered during the grace").anyMatch(a -> !a.equals(
                        "no answer"));
                List<String> grants = answers.stream().filter(a -> a.startsWith("201")).toList();
                assertThat(grants).as("allocations granted after the stop (of %d answers)", answers.size()).isEmpty();
                List<String> bobs = new ArrayList<>();
                for (Allocation a : bed.scheduler.allocations()) {
                    if (a.owner().orElse("").equals(bob.name())) {
                        bobs.add(a.id());
                    }
                }
                assertThat(bobs).as("bob's allocations on the ledger after the stop").isEmpty();
                assertThat(Files.exists(bed.socket)).as("the socket once the console closed").isFalse();
            } finally {
                stop.set(true);
                Clients.cleanUp(bed, alice, client);
                Clients.cleanUp(bed, bob);
            }
        }
    }
}
