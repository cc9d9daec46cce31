package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two real users submit detached jobs (that ignore TERM) and cancel them over the socket while the service stops
 * (docs/SERVICE.md: SIGTERM ends every job, TERM then KILL after kill_grace; nothing is granted once the stop came).
 * Counted by the test: once stop() returned (not interrupted) no job runs, no job cgroup or process is left, no GPU is
 * held, every job acknowledged (201) and every cancel acknowledged (200) has its audit line, and a submission begun
 * after stop() returned is refused 503 SHUTTING_DOWN.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class JobsRaceTheStopAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    record Told(String what, String id, int status, String body, long startNanos) {
    }

    @Test
    void detachedJobsAndCancelsRacingTheStop(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(1))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            List<LocalUsers.User> users = List.of(bed.accounts.user("alice"), bed.accounts.user("bob"));
            List<Told> told = new CopyOnWriteArrayList<>();
            List<String> broken = new CopyOnWriteArrayList<>();
            AtomicBoolean halt = new AtomicBoolean();
            AtomicLong stopReturned = new AtomicLong(Long.MAX_VALUE);
            List<Thread> clients = new ArrayList<>();
            for (LocalUsers.User u : users) {
                Path home = Clients.homeOf(tmp, u);
                for (int k = 0; k < 2; k++) {
                    Thread t = new Thread(() -> {
                        List<String> mine = new ArrayList<>();
                        while (!halt.get()) {
                            try {
                                long t0 = System.nanoTime();
                                if (mine.isEmpty() || ThreadLocalRandom.current().nextBoolean()) {
                                    ServiceBed.Answer a = bed.curl(u, "-X", "POST", "-H",
                                            "Content-Type: application/json", "--data-binary", Clients.detachedBody(
                                                    home, List.of("/bin/sh", "-c", "trap '' TERM; exec sleep 60")),
                                            "http://localhost/api/v1/jobs");
                                    String id = a.status() == 201 ? JSON.readTree(a.body()).path("id").asText() : null;
                                    if (id != null) {
                                        mine.add(id);
                                    }
                                    told.add(new Told("job.submit", id, a.status(), a.body(), t0));
                                } else {
                                    String id = mine.remove(ThreadLocalRandom.current().nextInt(mine.size()));
                                    ServiceBed.Answer a = bed.curl(u, "-X", "DELETE", "http://localhost/api/v1/jobs/"
                                            + id);
                                    told.add(new Told("job.cancel", id, a.status(), a.body(), t0));
                                }
                            } catch (Exception e) {
                                broken.add(u.name() + ": " + e);
                            }
                        }
                    }, "review13-jobs-" + u.name() + "-" + k);
                    t.start();
                    clients.add(t);
                }
            }
            List<String> problems = new ArrayList<>();
            try {
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (told.stream().filter(x -> x.status() == 201).count() < 6 && System.nanoTime() < until) {
                    Thread.sleep(20);
                }
                s.stop();
                stopReturned.set(System.nanoTime());
                List<String> left = new ArrayList<>();
                Clients.jobProcesses(bed.jobParent).forEach(p -> left.add("process " + p));
                Clients.jobCgroups(bed.jobParent).forEach(c -> left.add("cgroup " + c.getFileName()));
                left.addAll(Clients.held(bed));
                left.addAll(Clients.running(s).stream().map(j -> "job " + j + " running or queued").toList());
                problems.addAll(left.stream().map(l -> "when stop() returned: " + l).toList());
                Thread.sleep(1500); // the clients go on after the stop returned
            } finally {
                halt.set(true);
                for (Thread t : clients) {
                    t.join(90_000);
                }
            }
            problems.addAll(broken);
            for (Told x : told) {
                if (x.startNanos() > stopReturned.get() && x.status() / 100 == 2) {
                    problems.add("begun after stop() returned, yet " + x.status() + " " + x.what() + " " + x.id());
                }
                if (x.what().equals("job.submit") && x.startNanos() > stopReturned.get() && !x.body().contains(
                        "SHUTTING_DOWN")) {
                    problems.add("a submission after stop() returned answered " + x.status() + " " + x.body());
                }
            }
            bed.console.close();
            bed.console = null;
            s.close();
            bed.service = null;
            List<JsonNode> audit = new ArrayList<>();
            for (String l : Files.readAllLines(bed.state.resolve("audit.log"))) {
                audit.add(JSON.readTree(l));
            }
            for (Told x : told) {
                if (x.status() / 100 == 2 && audit.stream().noneMatch(n -> n.path("action").asText().equals(x.what())
                        && n.path("subject").asText().equals(x.id()) && n.path("result").asText().equals("ok"))) {
                    problems.add("acknowledged " + x.status() + ", no '" + x.what() + " ok' line: " + x.id());
                }
            }
            long ok = told.stream().filter(x -> x.status() / 100 == 2).count();
            long refused = told.stream().filter(x -> x.body().contains("SHUTTING_DOWN")).count();
            System.out.printf("review13 jobs race: %d answers, %d 2xx, %d SHUTTING_DOWN%n", told.size(), ok, refused);
            assertThat(problems).as("of %d answers (%d 2xx, %d SHUTTING_DOWN)", told.size(), ok, refused).isEmpty();
            assertThat(refused).as("clients told SHUTTING_DOWN").isPositive();
        }
    }
}
