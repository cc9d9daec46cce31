package io.gpusched.service.adversarial.review49;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md, Jobs: "A job's state turns when its processes end, its output file is final a moment later (the
 * relays' last bytes: at most 10 s for a pipe a process outside the job holds ...): {@code logs} of an ended job ...
 * wait for that, so they hold all of it", and past the user's output budget "an older job's output file is deleted
 * (its record stays; {@code logs} says why) ... (applied when a job ends and again when its output file is final, with
 * what its relays wrote after its end: review47)".
 *
 * <p>The second application (Jobs.detach's finally, review47) may delete the file of the job whose output just became
 * final. A {@code logs} asked in the moment between the job's end and that (the drain: a process outside the job holds
 * its stdout) passed NodeService.checkLogs (nothing deleted yet), got its {@code 200} head (ServiceRoutes.logs sends
 * it before Jobs.logs runs), then waits in Jobs.awaitOutputFinal; the file is then gone, Jobs.logs throws "has no
 * output file" after the head, and the user gets {@code 200} with an empty body: neither the output nor why it is
 * gone. Budget 100,000 bytes; alice's detached job writes 50,000 bytes and hands its stdout (through /proc/PID/fd/1, as
 * a descriptor passed over SCM_RIGHTS would be) to a process outside it, which writes 60,000 more just after the end.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class LogsDuringTheDrainOfADeletedOutputAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static boolean over(NodeService s, String id) {
        Object state = Clients.job(s, id).get("state");
        return state != null && !"QUEUED".equals(state) && !"RUNNING".equals(state);
    }

    @Test
    void logsAskedDuringTheDrainGiveTheOutputOrSayWhyItWasDeleted(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            FileOutputStream held = null;
            try {
                ServiceBed.Answer a = bed.post(alice, "/api/v1/jobs", Clients.detachedBody(home, List.of("/bin/sh",
                        "-c", "head -c 50000 /dev/zero; exec sleep 4")));
                assertThat(a.status()).as(a.body()).isEqualTo(201);
                String id = JSON.readTree(a.body()).path("id").asText();
                String pid = Review49.awaitProcess(bed.jobParent, "sleep", 60);
                held = new FileOutputStream("/proc/" + pid + "/fd/1"); // the job's stdout, outside the job
                assertThat(Clients.await(() -> over(s, id), 60)).as("alice's job ended").isTrue();
                AtomicReference<Object> logs = new AtomicReference<>();
                Thread asker = new Thread(() -> {
                    try {
                        logs.set(bed.curl(alice, "http://localhost/api/v1/jobs/" + id + "/logs"));
                    } catch (IOException | RuntimeException e) {
                        logs.set(e);
                    }
                }, "review49-logs");
                asker.setDaemon(true);
                asker.start();
                // its logs wait for the output to be final (the relay still reads the pipe held outside the job)
                boolean waiting = Clients.await(() -> Clients.threadsIn("Jobs").stream().anyMatch(t -> t.endsWith(
                        " in awaitOutputFinal")), 8);
                assertThat(waiting).as("alice's logs wait for her ended job's output to be final (threads in Jobs:"
                        + " %s; answer %s)", Clients.threadsIn("Jobs"), logs.get()).isTrue();
                byte[] late = new byte[60_000];
                Arrays.fill(late, (byte) 'x');
                held.write(late); // within the relay's 10 s: relayed into the file, as the docs say
                held.close();
                held = null;
                asker.join(TimeUnit.SECONDS.toMillis(60));
                Object got = logs.get();
                assertThat(got)
                        .as("an answer to alice's logs, asked during the drain: all her job's output or why it was"
                                + " deleted (got %s)", got)
                        .isInstanceOf(ServiceBed.Answer.class);
                ServiceBed.Answer ans = (ServiceBed.Answer) got;
                Path f = bed.state.resolve("jobs").resolve(id + ".out");
                String view = String.valueOf(Clients.job(s, id));
                assertThat(ans.body().length() >= 100_000 || ans.body().contains("deleted")).as("alice's logs of her"
                        + " ended job, asked during its drain: all its output (at least 100,000 bytes) or why it is"
                        + " not kept (the output budget deleted it) expected; got status %d with %d bytes: \"%s\""
                        + " (its output file exists: %s; job %s)", ans.status(), ans.body().length(),
                        abbrev(ans
                                .body()),
                        Files.exists(f), view).isTrue();
            } finally {
                if (held != null) {
                    held.close();
                }
                Clients.cleanUp(bed, alice);
                ServiceBed.keepOutputBytes(old);
            }
        }
    }

    private static String abbrev(String s) {
        return s.length() <= 300 ? s : s.substring(0, 300) + "...";
    }
}
