package io.gpusched.service.adversarial.review51;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review51 suspected (the lead wrote this test): since fc3914d9, {@code logs} of an ended job waits for its output to
 * be final before the answer's head (NodeService.checkLogs), and with a process outside the job holding its stdout
 * that takes 10 s of the relay's work and its let-go. The console closes a connection that stays silent past its idle
 * timeout unless the handler holds it open. Here the idle timeout is 1 s (the wait is ten times as long, so the outcome
 * does not hang on timing): alice's {@code logs}, asked once her job ended, must still get its output.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class LogsWaitingForFinalOutputOutlastTheIdleTimeoutAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static boolean over(NodeService s, String id) {
        Object state = Clients.job(s, id).get("state");
        return state != null && !"QUEUED".equals(state) && !"RUNNING".equals(state);
    }

    @Test
    void logsOfAJobWhoseOutputIsNotFinalYetAreNotCutByTheIdleTimeout(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve(b -> b.idleTimeout(Duration.ofSeconds(1)));
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            FileOutputStream held = null;
            try {
                ServiceBed.Answer a = bed.post(alice, "/api/v1/jobs", Clients.detachedBody(home, List.of("/bin/sh",
                        "-c", "echo review51-hello; exec sleep 3")));
                assertThat(a.status()).as(a.body()).isEqualTo(201);
                String id = JSON.readTree(a.body()).path("id").asText();
                String pid = awaitSleep(bed.jobParent);
                held = new FileOutputStream("/proc/" + pid + "/fd/1"); // its stdout, held outside the job, silent
                assertThat(Clients.await(() -> over(s, id), 60)).as("alice's job ended").isTrue();
                ServiceBed.Answer logs = bed.curl(alice, "http://localhost/api/v1/jobs/" + id + "/logs");
                assertThat(logs.body()).as("alice's logs of her ended job, asked while its output was not final yet"
                        + " (a silent process outside the job holds its stdout: about 12 s), on a console whose idle"
                        + " timeout is 1 s: status %d", logs.status()).contains("review51-hello");
                assertThat(logs.status()).isEqualTo(200);
            } finally {
                if (held != null) {
                    held.close();
                }
                Clients.cleanUp(bed, alice);
            }
        }
    }

    /** @return the pid of the job's {@code sleep} */
    private static String awaitSleep(Path jobParent) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < until) {
            for (String p : Clients.jobProcesses(jobParent)) {
                try {
                    if (Files.readString(Path.of("/proc", p, "comm")).strip().equals("sleep")) {
                        return p;
                    }
                } catch (java.io.IOException gone) {
                    // not it
                }
            }
            Thread.sleep(10);
        }
        throw new AssertionError("the job's sleep never ran");
    }
}
