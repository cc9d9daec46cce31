package io.gpusched.service.adversarial.review51;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
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
 * docs/SERVICE.md, Jobs: "A user's running detached jobs write at most 256 MiB together as well ...: past it each job's
 * further output is dropped after one line saying so", while "A user's ended jobs keep at most 256 MiB of output
 * together" (applied "when a job ends and again when its output file is final"). A job's "state turns when its
 * processes end", and its output file is final "a moment later (... at most 10 s for a pipe a process outside the job
 * holds, and 2 s to let it go)".
 *
 * <p>An ended job's bytes leave the running jobs' budget only in OutputFile.exit, which Jobs.run calls after the drain
 * (awaitOutput, letGo); from settle() on they already count among the ended jobs' (trim). For as long as the drain
 * lasts (12 s when a process outside the job holds its stdout, silent), the job that ended still takes its bytes from
 * the running jobs' budget: a job that runs then finds it spent by a job that is no longer running, and its output
 * is capped for good (OutputFile.capped never clears).
 *
 * <p>Here (budget 100,000 bytes) alice's job A writes 80,000 bytes, and a process outside it (root, through
 * /proc/PID/fd/1, as a descriptor passed over SCM_RIGHTS would be) holds its stdout, silent. A ends (EXITED, its GPU
 * released). Then alice's job B, the only one running, writes 50,000 bytes: within the running jobs' budget (and, as
 * the newest, within the ended jobs' budget too). B's output file keeps 20,000 of them and a line saying "the output of
 * its user's running detached jobs together passed 100000 bytes".
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class EndedJobsDrainCapsARunningJobsOutputAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static String detach(ServiceBed bed, LocalUsers.User u, Path home, String script) throws Exception {
        ServiceBed.Answer a = bed.post(u, "/api/v1/jobs", Clients.detachedBody(home, List.of("/bin/sh", "-c",
                script)));
        assertThat(a.status()).as(a.body()).isEqualTo(201);
        return JSON.readTree(a.body()).path("id").asText();
    }

    private static Object state(NodeService s, String id) {
        return Clients.job(s, id).get("state");
    }

    private static boolean over(NodeService s, String id) {
        Object st = state(s, id);
        return st != null && !"QUEUED".equals(st) && !"RUNNING".equals(st);
    }

    private static long size(Path f) {
        try {
            return Files.exists(f) ? Files.size(f) : 0;
        } catch (IOException gone) {
            return 0;
        }
    }

    @Test
    void aJobThatEndedNoLongerTakesTheRunningJobsOutputBudget(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Path jobs = bed.state.resolve("jobs");
            Path go = home.resolve("go-review51");
            FileOutputStream held = null;
            try {
                // A first (B, the newer, then comes first in the ended jobs' budget too); B waits for the test's go:
                // its write then comes at a moment the test chooses
                String a = detach(bed, alice, home, "head -c 80000 /dev/zero; exec timeout 6 sleep 60");
                String b = detach(bed, alice, home, "while [ ! -e go-review51 ]; do sleep 0.05; done;"
                        + " head -c 50000 /dev/zero");
                String pid = Review51.awaitProcess(bed.jobParent, "timeout", 60);
                held = new FileOutputStream("/proc/" + pid + "/fd/1"); // a process outside A holds its stdout
                assertThat(Clients.await(() -> size(jobs.resolve(a + ".out")) == 80_000, 60)).as("A's 80,000 bytes"
                        + " written (%d)", size(jobs.resolve(a + ".out"))).isTrue();
                assertThat(Clients.await(() -> over(s, a), 60)).as("A ended").isTrue();
                assertThat(state(s, a)).as("A's state").isEqualTo("EXITED");
                assertThat(state(s, b)).as("B's state").isEqualTo("RUNNING");
                boolean drainingBefore = !Clients.threads("gpusched-job-out-" + a).isEmpty();
                Files.writeString(go, "go"); // B writes its 50,000 bytes now, A's drain under way (10 s of it)
                assertThat(Clients.await(() -> over(s, b), 60)).as("B ended").isTrue();
                ServiceBed.Answer logs = bed.curl(alice, "http://localhost/api/v1/jobs/" + b + "/logs");
                boolean drainingAfter = !Clients.threads("gpusched-job-out-" + a).isEmpty();
                assertThat(logs.status()).as("logs of B: %s", logs.body()).isEqualTo(200);
                byte[] kept = Files.readAllBytes(jobs.resolve(b + ".out")); // final: its logs answered
                long zeros = 0;
                for (byte x : kept) {
                    zeros += x == 0 ? 1 : 0;
                }
                String note = new String(kept, StandardCharsets.UTF_8).replace("\0", "").strip();
                assertThat(zeros).as("bytes of the 50,000 that B, alice's only running job, wrote (A had ended:"
                        + " EXITED, its GPU released; A's drain under way before B wrote: %s, after B's logs: %s) that"
                        + " its output kept: all of them expected, within the running jobs' budget of 100,000 bytes;"
                        + " its output said: \"%s\"", drainingBefore, drainingAfter, note)
                        .isEqualTo(50_000);
                assertThat(note).as("B's output holds nothing but its bytes: no line saying its output was cut")
                        .isEmpty();
            } finally {
                if (held != null) {
                    held.close();
                }
                Files.deleteIfExists(go);
                Clients.cleanUp(bed, alice);
                Clients.await(() -> Clients.jobThreads().isEmpty(), 30);
                ServiceBed.keepOutputBytes(old);
            }
        }
    }
}
