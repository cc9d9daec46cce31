package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.OwnThread;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Several attached jobs whose clients do not read, at once. A cancel of each must release its GPU (the exit line
 * waits for the client), and what each held (the request's worker, the relays, the connection's descriptors) must go
 * once the client goes; at the stop, with a waiting request and a detached job beside them, every GPU is released once
 * {@code close()} returns, the waiting client is told {@code 503}, and once the console closed nothing of the stalled
 * clients is left in the service (threads, descriptors), although the clients themselves never read again.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class ManyStalledClientsAttackTest {
    private static final int STALLED = 6;

    private static List<Process> stalled(ServiceBed bed, NodeService s, Path tmp, LocalUsers.User... users)
            throws Exception {
        List<Process> clients = new ArrayList<>();
        for (int i = 0; i < STALLED; i++) {
            LocalUsers.User u = users[i % users.length];
            clients.add(Clients.attached(bed, u, Clients.jobBody(Clients.homeOf(tmp, u), List.of("/usr/bin/yes",
                    "gpusched-" + i))));
        }
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        int inARow = 0;
        while (inARow < 20) {
            if (System.nanoTime() > until) {
                throw new AssertionError("the " + STALLED + " jobs never all blocked on their clients: "
                        + Clients.running(s) + " running, processes " + Clients.jobProcesses(bed.jobParent));
            }
            int blocked = 0;
            for (String pid : Clients.jobProcesses(bed.jobParent)) {
                try {
                    Path p = Path.of("/proc", pid);
                    String stat = Files.readString(p.resolve("stat"));
                    if (Files.readString(p.resolve("comm")).strip().equals("yes") && stat.substring(stat.lastIndexOf(
                            ')') + 2).startsWith("S")) {
                        blocked++;
                    }
                } catch (java.io.IOException gone) {
                    // exited
                }
            }
            inARow = blocked == STALLED ? inARow + 1 : 0;
            Thread.sleep(50);
        }
        return clients;
    }

    @Test
    void cancelledJobsOfStalledClientsLeaveNothingOnceTheClientsGo(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            Thread.sleep(1_000);
            long fdsBefore = Clients.fds();
            List<Process> clients = stalled(bed, s, tmp, alice, bob);
            try {
                List<String> jobs = Clients.running(s);
                assertThat(jobs).hasSize(STALLED);
                for (String j : jobs) {
                    LocalUsers.User owner = alice.name().equals(Clients.job(s, j).get("owner")) ? alice : bob;
                    ServiceBed.Answer a = bed.curl(owner, "-X", "DELETE", "http://localhost/api/v1/jobs/" + j);
                    assertThat(a.status()).as("cancel of %s: %s", j, a.body()).isEqualTo(200);
                }
                assertThat(Clients.held(bed)).as("GPUs held once every cancel returned").isEmpty();
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroups once every cancel returned").isEmpty();
                for (Process c : clients) { // the clients go
                    c.destroyForcibly();
                    c.waitFor(30, TimeUnit.SECONDS);
                }
                boolean gone = Clients.await(() -> Clients.jobThreads().isEmpty() && Clients.threadsIn(
                        "StreamSink").isEmpty(), 60);
                assertThat(gone).as("the jobs' threads once their clients went: %s; in StreamSink: %s", Clients
                        .jobThreads(), Clients.threadsIn("StreamSink")).isTrue();
                boolean fds = Clients.await(() -> {
                    try {
                        return Clients.fds() <= fdsBefore + 4;
                    } catch (java.io.IOException e) {
                        return false;
                    }
                }, 60);
                assertThat(fds).as("open descriptors %d, before the clients %d", Clients.fds(), fdsBefore).isTrue();
            } finally {
                Clients.cleanUp(bed, alice, clients.toArray(Process[]::new));
                Clients.cleanUp(bed, bob);
            }
        }
    }

    @Test
    void theStopWithStalledClientsAWaitAndADetachedJobLeavesNothing(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            LocalUsers.User carol = bed.accounts.user("carol");
            Thread.sleep(1_000);
            long fdsBefore = Clients.fds();
            List<Process> clients = stalled(bed, s, tmp, alice, bob);
            try {
                String detached = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sleep\",\"600\"],\"env\":{\"PATH\":"
                        + "\"/usr/bin:/bin\"},\"cwd\":" + Clients.JSON.writeValueAsString(Clients.homeOf(tmp, carol)
                                .toString())
                        + ",\"detach\":true}";
                ServiceBed.Answer d = bed.curl(carol, "-X", "POST", "-H", "Content-Type: application/json",
                        "--data-binary", detached, "http://localhost/api/v1/jobs");
                assertThat(d.status()).as("carol's detached job: %s", d.body()).isEqualTo(201);
                CompletableFuture<String> waiting = OwnThread.supply(() -> {
                    try {
                        ServiceBed.Answer a = bed.curl(carol, "-X", "POST", "-H", "Content-Type: application/json",
                                "--data-binary", "{\"flags\":[\"--gpu=2\"],\"wait\":\"2m\"}",
                                "http://localhost/api/v1/allocations");
                        return a.status() + " " + a.body();
                    } catch (Exception e) {
                        return "no answer: " + e.getMessage();
                    }
                });
                assertThat(Clients.await(() -> s.queueView().size() == 1, 60)).as("carol's request waits").isTrue();
                s.close();
                assertThat(Clients.held(bed)).as("GPUs held once close() returned").isEmpty();
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroups once close() returned").isEmpty();
                for (Map<String, Object> j : s.jobViews(ServiceBed.root())) {
                    assertThat(j.get("state")).as("job %s", j.get("id")).isIn("CANCELLED", "KILLED");
                }
                bed.console.close();
                bed.console = null;
                bed.service = null;
                assertThat(waiting.get(90, TimeUnit.SECONDS)).as("carol's waiting client").startsWith("503 ")
                        .contains("SHUTTING_DOWN");
                boolean gone = Clients.await(() -> Clients.jobThreads().isEmpty() && Clients.threadsIn(
                        "StreamSink").isEmpty(), 60);
                assertThat(gone).as("the jobs' threads once the console closed (their clients still there, not"
                        + " reading): %s; in StreamSink: %s %s", Clients.jobThreads(),
                        Clients.threadsIn(
                                "StreamSink"),
                        Clients.threadsIn("StreamSink").isEmpty() ? "" : Clients.stackOf(
                                Clients.threadsIn("StreamSink").get(0).split(" in ")[0]))
                        .isTrue();
                boolean fds = Clients.await(() -> {
                    try {
                        return Clients.fds() <= fdsBefore + 4;
                    } catch (java.io.IOException e) {
                        return false;
                    }
                }, 60);
                assertThat(fds).as("open descriptors %d, before the clients %d", Clients.fds(), fdsBefore).isTrue();
            } finally {
                Clients.cleanUp(bed, alice, clients.toArray(Process[]::new));
                Clients.cleanUp(bed, bob);
                Clients.cleanUp(bed, carol);
            }
        }
    }
}
