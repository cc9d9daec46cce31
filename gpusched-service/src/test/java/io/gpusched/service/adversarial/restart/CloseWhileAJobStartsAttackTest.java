package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code NodeService.close()} while a job is being started. docs/SERVICE.md: "However a job ends (exit, death, cancel,
 * client gone, service restart), its cgroup's processes are ended, the fence revoked, the cgroup removed and the
 * allocation released", and SIGTERM "ends every job (TERM, KILL after kill_grace)". {@code Jobs.close()} marks each
 * live job cancelled and ends the processes of those launched; a job whose driver has passed its "cancelled?" check
 * but not yet launched (its allocation set, its cgroup being made and fenced, its process spawned) has nothing to end
 * yet, and nothing ends it once it runs: its driver only stops heart-beating. close() waits out its whole deadline
 * (kill_grace plus 30 s, here 30.3 s) and returns with the job RUNNING, its cgroup in place and its allocation held;
 * only then does the launcher's close end the starter thread, whose exit happens to deliver the job's parent-death
 * signal (a process the job forked gets none), and the job's driver removes the cgroup and releases the allocation
 * after close() returned.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class CloseWhileAJobStartsAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aJobStartingWhileTheServiceClosesDoesNotOutliveClose(@TempDir Path tmp) throws Exception {
        GpuConfig config = Restarts.config(Duration.ofMillis(300));
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Restarts.homeOf(tmp, alice);
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sleep\",\"600\"],\"env\":{\"PATH\":"
                    + "\"/usr/bin:/bin\"},\"cwd\":" + JSON.writeValueAsString(home.toString()) + ",\"detach\":true}";
            Thread submit = new Thread(() -> {
                try {
                    bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body,
                            "http://localhost/api/v1/jobs");
                } catch (Exception e) {
                    // the service closed under the request: what matters is what close() left
                }
            }, "submit");
            submit.start();
            Caller root = ServiceBed.root();
            boolean caught = false;
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!caught && System.nanoTime() < until) {
                for (Map<String, Object> j : s.jobViews(root)) {
                    if (j.get("allocationId") != null && j.get("cgroup") == null && "QUEUED".equals(j.get("state"))) {
                        caught = true; // allocated, being launched
                    }
                }
            }
            assertThat(caught).as("the job was seen allocated and not yet launched").isTrue();
            s.close();
            List<String> left = new ArrayList<>();
            for (Path cg : Restarts.jobCgroups(bed.jobParent)) {
                String procs = Files.readString(cg.resolve("cgroup.procs")).strip();
                left.add(cg.getFileName() + (procs.isEmpty() ? " (empty)" : " with processes " + procs.replace('\n',
                        ' ')));
            }
            List<Object> states = s.jobViews(root).stream().map(j -> j.get("id") + " " + j.get("state")).map(
                    Object.class::cast).toList();
            try {
                assertThat(left).as("job cgroups left under %s once close() returned (jobs: %s)", bed.jobParent,
                        states).isEmpty();
                assertThat(states).as("jobs still running once close() returned").noneMatch(x -> x.toString()
                        .endsWith("RUNNING"));
            } finally {
                for (Path cg : Restarts.jobCgroups(bed.jobParent)) { // end what close() left, so the bed can be removed
                    Files.writeString(cg.resolve("cgroup.kill"), "1");
                }
                submit.join(TimeUnit.SECONDS.toMillis(90));
            }
        }
    }
}
