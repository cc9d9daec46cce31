package io.gpusched.service.adversarial.review51;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
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
 * docs/SERVICE.md, Jobs: "A user's ended jobs keep at most 256 MiB of output together, newest first: past it an older
 * job's output file is deleted (its record stays; logs says why) ... (applied when a job ends and again when its
 * output file is final ...)". The budget is over the user's ENDED jobs, and Jobs.trim walks them newest first by
 * submission (the jobs map's insertion order), not by when they ended: a long job submitted first and ending last is
 * the "oldest" there, so the output of the job that has just ended, the newest output the user has, is the first to
 * go, at the very moment it ends, to keep the output of a job that ended before it.
 *
 * <p>(A judgement on "newest": the records' own rule keeps "the last 100 that ran"; here the reading is that the job
 * that ended last is the newest of the ended jobs.) Budget 100,000 bytes: alice submits X (it waits for a go), then Y;
 * Y writes 60,000 bytes and ends; then X writes 60,000 bytes and ends. X's output, just written, is deleted at once
 * ("newer jobs' output is kept first"), Y's (ended before X) kept.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class JustEndedJobsOutputDeletedFirstAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static String detach(ServiceBed bed, LocalUsers.User u, Path home, String script) throws Exception {
        ServiceBed.Answer a = bed.post(u, "/api/v1/jobs", Clients.detachedBody(home, List.of("/bin/sh", "-c",
                script)));
        assertThat(a.status()).as(a.body()).isEqualTo(201);
        return JSON.readTree(a.body()).path("id").asText();
    }

    private static boolean over(NodeService s, String id) {
        Object st = Clients.job(s, id).get("state");
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
    void theJobThatEndedLastKeepsItsOutputBeforeOneThatEndedEarlier(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Path jobs = bed.state.resolve("jobs");
            Path go = home.resolve("go-review51-x");
            try {
                String x = detach(bed, alice, home, "while [ ! -e go-review51-x ]; do sleep 0.05; done;"
                        + " head -c 60000 /dev/zero");
                String y = detach(bed, alice, home, "head -c 60000 /dev/zero");
                assertThat(Clients.await(() -> over(s, y), 60)).as("Y ended").isTrue();
                ServiceBed.Answer ly = bed.curl(alice, "http://localhost/api/v1/jobs/" + y + "/logs");
                assertThat(ly.status()).as("logs of Y once it ended: %s", ly.body()).isEqualTo(200);
                assertThat(over(s, x)).as("X still running when Y ended").isFalse();
                Files.writeString(go, "go");
                assertThat(Clients.await(() -> over(s, x), 60)).as("X ended").isTrue();
                ServiceBed.Answer lx = bed.curl(alice, "http://localhost/api/v1/jobs/" + x + "/logs");
                String xSays = lx.status() + " " + (lx.body().length() > 400 ? lx.body().substring(0, 400)
                        : lx.body()).replace("\0", "");
                assertThat(lx.status()).as("logs of X, asked right after X (submitted first) ended, after Y"
                        + " (submitted second) had ended: X's output is the newest alice's ended jobs have, and"
                        + " expected kept (60,000 bytes) before Y's; answered: %s (on disk: X %d bytes, Y %d)", xSays,
                        size(jobs.resolve(x + ".out")), size(jobs.resolve(y + ".out"))).isEqualTo(200);
                assertThat(size(jobs.resolve(x + ".out"))).as("bytes of X's output kept").isEqualTo(60_000);
            } finally {
                Files.deleteIfExists(go);
                Clients.cleanUp(bed, alice);
                Clients.await(() -> Clients.jobThreads().isEmpty(), 30);
                ServiceBed.keepOutputBytes(old);
            }
        }
    }
}
