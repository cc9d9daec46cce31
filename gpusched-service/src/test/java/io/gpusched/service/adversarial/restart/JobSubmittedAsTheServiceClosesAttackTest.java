package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job submitted just as the node service closes. {@code Jobs.prepare} refuses once the service is closing ("the node
 * service is stopping; no job is started"), but it reads {@code closing} first, then checks the working directory as
 * the caller (a {@code setpriv ... sh -c 'cd -- "$1"' gpusched-cwd-check} process: milliseconds), and only then
 * registers the job. {@code Jobs.close()} sets {@code closing} and takes its list of live jobs in between: the job is
 * in neither, so close neither cancels it nor waits for it, and while close waits for the other jobs (here one that
 * ignores TERM, ended by KILL after kill_grace) the fair queue is still open: the job is allocated and launched after
 * the service's close began, and is still there, running in its cgroup, when close returns.
 *
 * <p>The test closes the service the moment it sees a cwd-check process of alice's (polling this JVM's descendants)
 * while alice keeps submitting jobs, then checks what close left: job cgroups, jobs not over, and jobs started after
 * close began that close did not end (a job close knew of that was launched during close ends CANCELLED).
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class JobSubmittedAsTheServiceClosesAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void aJobWhoseSubmissionRacesCloseIsRefusedOrEndedByClose(@TempDir Path tmp) throws Exception {
        GpuConfig config = Restarts.config(Duration.ofSeconds(2));
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Restarts.homeOf(tmp, alice);
            String cwd = JSON.writeValueAsString(home.toString());
            // close waits kill_grace for this one: the queue stays open meanwhile
            String stubborn = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\",\"trap '' TERM; touch ready; exec"
                    + " /bin/sleep 600\"],\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":" + cwd + ",\"detach\":true}";
            ServiceBed.Answer first = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", stubborn, "http://localhost/api/v1/jobs");
            assertThat(first.status()).as("the first job's answer: %s", first.body()).isEqualTo(201);
            long ready = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!Files.exists(home.resolve("ready")) && System.nanoTime() < ready) {
                Thread.sleep(10); // it ignores TERM now
            }
            // a child that outlives its shell: a parent-death signal to the shell does not end it
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\",\"/bin/sleep 600 & wait\"],\"env\":"
                    + "{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":" + cwd + ",\"detach\":true}";
            AtomicBoolean closing = new AtomicBoolean();
            AtomicInteger submitted = new AtomicInteger();
            List<Thread> submitters = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                Thread t = new Thread(() -> {
                    while (!closing.get() && submitted.incrementAndGet() <= 60) {
                        try {
                            ServiceBed.Answer a = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                                    "--data-binary", body, "http://localhost/api/v1/jobs");
                            if (!closing.get() && a.status() == 201) { // missed: its GPU back for the next try
                                String id = JSON.readTree(a.body()).get("id").asText();
                                bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + id);
                            }
                        } catch (Exception e) {
                            // the service closed under the request: what matters is what close() left
                        }
                    }
                }, "submit-" + i);
                submitters.add(t);
            }
            AtomicReference<Instant> closeBegan = new AtomicReference<>();
            submitters.forEach(Thread::start);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (closeBegan.get() == null && System.nanoTime() < until && submitters.stream().anyMatch(
                    Thread::isAlive)) {
                boolean checking = ProcessHandle.current().descendants().anyMatch(p -> p.info().commandLine()
                        .map(c -> c.contains("gpusched-cwd-check")).orElse(false));
                if (checking) {
                    closeBegan.set(Instant.now());
                    closing.set(true);
                    s.close();
                }
            }
            closing.set(true);
            assertThat(closeBegan.get()).as("a submission's working-directory check was seen under way").isNotNull();
            Caller root = ServiceBed.root();
            List<String> left = new ArrayList<>();
            for (Path cg : Restarts.jobCgroups(bed.jobParent)) {
                String procs;
                try {
                    procs = Files.readString(cg.resolve("cgroup.procs")).strip();
                } catch (IOException gone) {
                    procs = "?"; // its driver is removing it, after close returned
                }
                left.add("cgroup " + cg.getFileName() + (procs.isEmpty() ? " (empty)" : " with processes "
                        + procs.replace('\n', ' ')));
            }
            List<String> states = new ArrayList<>();
            for (Map<String, Object> j : s.jobViews(root)) {
                String state = (String) j.get("state");
                Object started = j.get("startedAt");
                states.add(j.get("id") + " " + state + " started " + started);
                if ("RUNNING".equals(state) || "QUEUED".equals(state)) {
                    left.add("job " + j.get("id") + " " + state);
                } else if (started != null && Instant.parse((String) started).isAfter(closeBegan.get())
                        && !"CANCELLED".equals(state)) {
                    left.add("job " + j.get("id") + " started at " + started + " after close began at "
                            + closeBegan.get() + ", and not cancelled by it (" + state + ")");
                }
            }
            bed.scheduler.allocations().stream().filter(a -> a.request().jobId().isPresent()).forEach(a -> left.add(
                    "allocation " + a.id() + " of job " + a.request().jobId().get()));
            try {
                assertThat(left).as("what close() left or let start, once it returned (jobs: %s)", states).isEmpty();
            } finally {
                for (Path cg : Restarts.jobCgroups(bed.jobParent)) { // end what close() left, so the bed can be removed
                    try {
                        Files.writeString(cg.resolve("cgroup.kill"), "1");
                    } catch (IOException gone) {
                        // removed meanwhile
                    }
                }
                for (Thread t : submitters) {
                    t.join(TimeUnit.SECONDS.toMillis(90));
                }
            }
        }
    }
}
