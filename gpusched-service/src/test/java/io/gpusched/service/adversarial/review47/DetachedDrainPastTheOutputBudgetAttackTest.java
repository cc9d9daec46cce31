package io.gpusched.service.adversarial.review47;

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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md, Jobs: "A user's ended jobs keep at most 256 MiB of output together, newest first: past it an older
 * job's output file is deleted", and a detached job's "output file is final a moment later (the relays' last bytes: at
 * most 10 s for a pipe a process outside the job holds ...)". Jobs.run applies the owner's output budget in settle()
 * ("its output is final now"), which comes before awaitOutput: what the relays write after it (the last bytes of a
 * full pipe, or what a process outside the job writes in its 10 s) is never counted, until the user's next detached
 * job ends. Here (budget 100,000 bytes) alice's first job writes 60,000 bytes and ends; her second job hands its stdout
 * to a process outside it (root, through /proc/PID/fd/1, as a descriptor passed over SCM_RIGHTS would), which writes
 * 60,000 bytes just after the job ended: relayed, as documented, into the job's file. alice makes no more jobs; her
 * ended jobs keep 120,000 bytes for good.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class DetachedDrainPastTheOutputBudgetAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static String detach(ServiceBed bed, LocalUsers.User u, Path home, String script) throws Exception {
        ServiceBed.Answer a = bed.post(u, "/api/v1/jobs", Clients.detachedBody(home, List.of("/bin/sh", "-c",
                script)));
        assertThat(a.status()).as(a.body()).isEqualTo(201);
        return JSON.readTree(a.body()).path("id").asText();
    }

    private static boolean over(NodeService s, String id) {
        Object state = Clients.job(s, id).get("state");
        return state != null && !"QUEUED".equals(state) && !"RUNNING".equals(state);
    }

    private static long size(Path f) {
        try {
            return Files.exists(f) ? Files.size(f) : 0;
        } catch (IOException gone) {
            return 0;
        }
    }

    @Test
    void whatTheRelaysWriteAfterTheJobEndedCountsInItsUsersOutputBudget(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Path jobs = bed.state.resolve("jobs");
            FileOutputStream held = null;
            try {
                String first = detach(bed, alice, home, "head -c 60000 /dev/zero");
                assertThat(Clients.await(() -> over(s, first) && size(jobs.resolve(first + ".out")) == 60_000, 60))
                        .as("alice's first job ended with its 60,000 bytes kept (%d)", size(jobs.resolve(first
                                + ".out")))
                        .isTrue();
                String second = detach(bed, alice, home, "exec sleep 4");
                String pid = Review47.awaitProcess(bed.jobParent, "sleep", 60);
                held = new FileOutputStream("/proc/" + pid + "/fd/1");
                assertThat(Clients.await(() -> over(s, second), 60)).as("alice's second job ended").isTrue();
                assertThat(Clients.await(() -> bed.scheduler.allocations().isEmpty(), 30)).as(
                        "its GPU released (held: %s)", Clients.held(bed)).isTrue();
                Thread.sleep(300);
                byte[] late = new byte[60_000];
                Arrays.fill(late, (byte) 'x');
                held.write(late); // within the relay's 10 s: relayed, as the docs say
                held.close();
                held = null;
                Path f = jobs.resolve(second + ".out");
                assertThat(Clients.await(() -> Clients.jobThreads().isEmpty(), 30)).as("the second job's output is"
                        + " final: its driver and relays ended (left: %s)", Clients.jobThreads()).isTrue();
                assertThat(size(f)).as("the relay wrote what the outside process wrote just after the job's end into"
                        + " its output file").isGreaterThanOrEqualTo(60_000);
                Clients.await(() -> size(jobs.resolve(first + ".out")) + size(f) <= 100_000, Duration.ofSeconds(30));
                long one = size(jobs.resolve(first + ".out"));
                long two = size(f);
                assertThat(one + two).as("bytes of alice's two ended jobs' output kept 30 s after the last one's"
                        + " output was final (first %d, second %d; budget 100,000), alice making no more jobs", one,
                        two).isLessThanOrEqualTo(100_000);
            } finally {
                if (held != null) {
                    held.close();
                }
                Clients.cleanUp(bed, alice);
                ServiceBed.keepOutputBytes(old);
            }
        }
    }
}
