package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review17: one user's waiting requests are bounded (256; "429 RATE_LIMITED (also: over 256 waiting requests of one
 * user ...)", docs/SERVICE.md). A detached job with a {@code wait} is answered {@code 201 QUEUED} before it is put in
 * the queue: {@code Jobs.detach} starts the job's thread and returns, and that thread's {@code FairQueue.enqueue}
 * refuses the 257th only afterwards, when nobody is told any more (the job just turns FAILED). So a user past the
 * limit is answered "queued" for a job that never waits, and each such job still cost an output file, a thread and
 * a working-directory check as the user before the refusal.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class DetachedJobsPastTheQueueLimitAttackTest {

    @Test
    void theDetachedJobPastAUsersWaitingLimitIsRefused429NotAnswered201Queued(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Answer full = bed.post(null, "/api/v1/allocations", "{\"flags\":[\"--gpu=8\"]}");
            assertThat(full.status()).as(full.body()).isEqualTo(201);

            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1");
            m.put("detach", true);
            m.put("wait", "10m");
            String body = Clients.JSON.writeValueAsString(m);
            Path f = tmp.resolve("job.json");
            Files.writeString(f, body);
            Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
            // 256 jobs on one connection (curl's URL globbing), each answered with its status on a line of its own
            LocalUsers.Result r = LocalUsers.runAs(alice, List.of("curl", "-s", "--unix-socket", bed.socket.toString(),
                    "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "@" + f, "-w",
                    "\nSTATUS:%{http_code}\n", "http://localhost/api/v1/jobs?n=[1-256]"), 150);
            long queued = r.out().lines().filter(l -> l.equals("STATUS:201")).count();
            assertThat(queued).as("alice's first 256 waiting jobs are queued: %s", r.err()).isEqualTo(256);
            for (int i = 0; i < 600 && bed.service.queueView().size() < 256; i++) {
                Thread.sleep(100);
            }
            assertThat(bed.service.queueView()).hasSize(256);

            Answer a = bed.post(alice, "/api/v1/jobs", body);
            String later = "";
            if (a.status() == 201) {
                String id = Clients.JSON.readTree(a.body()).path("id").asText();
                for (int i = 0; i < 100; i++) {
                    JsonNode j = Clients.JSON.readTree(bed.curl(alice, "http://localhost/api/v1/jobs/" + id).body());
                    later = j.toString();
                    if (!j.path("state").asText().equals("QUEUED")) {
                        break;
                    }
                    Thread.sleep(100);
                }
            }
            assertThat(a.status()).as("the answer to alice's 257th waiting job: %s%nthe same job a moment later: %s",
                    a.body(), later).isEqualTo(429);
            assertThat(a.body()).contains("RATE_LIMITED");
        }
    }
}
