package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The service's heartbeat at its least (NodeService.Builder.heartbeat, 100 ms) with eight attached clients of two
 * users at once, half of them reading late (a paused terminal, 3 s) and then slowly: each stream carries its job's
 * stdout whole and in order, no line is cut or interleaved by a heartbeat, no error line, and the exit line comes last
 * with the job's code (docs/SERVICE.md, Jobs).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ManyAttachedClientsFastHeartbeatAttackTest {

    @Test
    void eightClientsWithAHundredMillisecondHeartbeatEachGetTheirWholeStream(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(500))).jobs()) {
            bed.heartbeat = Duration.ofMillis(100);
            NodeService s = bed.start();
            bed.serve();
            List<LocalUsers.User> users = List.of(bed.accounts.user("alice"), bed.accounts.user("bob"));
            String script = "i=0; while [ $i -lt 30 ]; do echo out$i; echo err$i >&2; i=$((i+1)); sleep 0.03; done;"
                    + " seq 1 60000; seq 1 30000 >&2; exit 3";
            String want = IntStream.range(0, 30).mapToObj(i -> "out" + i + "\n").collect(Collectors.joining())
                    + IntStream.rangeClosed(1, 60000).mapToObj(i -> i + "\n").collect(Collectors.joining());
            List<Process> clients = new ArrayList<>();
            List<String> problems = new CopyOnWriteArrayList<>();
            List<Thread> readers = new ArrayList<>();
            try {
                for (int k = 0; k < 8; k++) {
                    LocalUsers.User u = users.get(k % 2);
                    Process c = Clients.attached(bed, u, Clients.jobBody(Clients.homeOf(tmp, u), List.of("/bin/sh",
                            "-c", script)));
                    clients.add(c);
                    boolean late = k >= 4;
                    int n = k;
                    Thread t = new Thread(() -> {
                        try {
                            if (late) {
                                Thread.sleep(3000);
                            }
                            Clients.Ndjson got = Clients.Ndjson.of(Clients.readAll(c, 90));
                            String out = new String(got.stdout(), StandardCharsets.US_ASCII);
                            List<String> types = got.types();
                            if (types.isEmpty() || !types.get(types.size() - 1).equals("exit")) {
                                problems.add("client " + n + ": last line not exit: " + got.summary());
                            } else if (got.lines().get(got.lines().size() - 1).path("code").asInt() != 3) {
                                problems.add("client " + n + ": exit " + got.lines().get(got.lines().size() - 1));
                            }
                            if (types.stream().anyMatch(x -> x.startsWith("<cut") || x.equals("error"))) {
                                problems.add("client " + n + ": " + got.summary());
                            }
                            if (!out.equals(want)) {
                                problems.add("client " + n + ": stdout " + out.length() + " chars, want " + want
                                        .length() + " (" + got.summary() + ")");
                            }
                        } catch (Exception e) {
                            problems.add("client " + n + ": " + e);
                        }
                    }, "review13-reader-" + k);
                    t.start();
                    readers.add(t);
                }
                for (Thread t : readers) {
                    t.join(100_000);
                }
                assertThat(problems).as("eight attached clients, heartbeat 100 ms").isEmpty();
                assertThat(Clients.await(() -> Clients.held(bed).isEmpty(), 30)).as("GPUs held after: %s", Clients
                        .held(bed)).isTrue();
            } finally {
                for (LocalUsers.User u : users) {
                    Clients.cleanUp(bed, u, clients.toArray(new Process[0]));
                }
            }
        }
    }
}
