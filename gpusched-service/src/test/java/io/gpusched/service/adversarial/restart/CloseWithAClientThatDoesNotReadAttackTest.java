package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A stop, and a cancel, while an attached job's client does not read. alice's attached job prints without end ({@code
 * yes}) to a curl whose own output goes to a pipe nobody reads ({@code curl ... | sleep 600}): curl stops reading the
 * socket, the service's write to it blocks, and the job is held by its full stdout pipe. docs/SERVICE.md: SIGTERM
 * "ends every job (TERM, KILL after kill_grace)", and however a job ends its allocation is released. The job's driver
 * used to wait on its client for that: its heartbeat (and then the exit line) waited for the stream's lock, which the
 * output thread held inside the blocked write. The driver never saw the job end, {@code close()} waited out kill_grace
 * plus 30 s and returned with alice's allocation still held, released only when the console later cut the connection.
 * The stop comes after the client has stalled past two heartbeats, the cancel at once (before any heartbeat).
 * Here the allocation must be released, and the job's cgroup gone, once {@code close()} (or the cancel) returns.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class CloseWithAClientThatDoesNotReadAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void theStopReleasesTheGpusOfAJobWhoseClientStalled(@TempDir Path tmp) throws Exception {
        withAStalledClient(tmp, (bed, alice, job) -> {
            // stalled past two of the driver's heartbeats (every second here, while a job is silent to its client):
            // a heartbeat that waits for the blocked write holds the driver from then on
            Thread.sleep(2_500);
            assertThat(stateOfYes(bed.jobParent)).as("still stalled").contains("S");
            bed.service.close();
            return "once close() returned (job " + job + ")";
        });
    }

    @Test
    void aCancelReleasesTheGpusOfAJobWhoseClientStalled(@TempDir Path tmp) throws Exception {
        withAStalledClient(tmp, (bed, alice, job) -> {
            ServiceBed.Answer a = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job);
            assertThat(a.status()).as("alice's cancel of her job: %s", a.body()).isEqualTo(200);
            return "once the cancel of " + job + " returned";
        });
    }

    /** What a test does to a job whose client stalled. */
    private interface Ending {
        /** @return when the check comes, in words */
        String end(ServiceBed bed, LocalUsers.User alice, String job) throws Exception;
    }

    /** Runs alice's stalled attached job, ends it as {@code ending} says, and checks that nothing is left. */
    private static void withAStalledClient(Path tmp, Ending ending) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Restarts.config(Duration.ofMillis(300))).jobs()) {
            bed.heartbeat = Duration.ofSeconds(1); // the service's default is 5 s
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = stalledClient(bed, alice, Restarts.homeOf(tmp, alice));
            try {
                String when = ending.end(bed, alice, awaitStalled(bed, s));
                assertNothingLeft(bed, when);
            } finally {
                end(client, alice);
            }
        }
    }

    /** @return alice's curl, attached to a job printing without end, its output going to a pipe nobody reads */
    private static Process stalledClient(ServiceBed bed, LocalUsers.User alice, Path home) throws IOException {
        String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/usr/bin/yes\",\"gpusched\"],\"env\":{\"PATH\":"
                + "\"/usr/bin:/bin\"},\"cwd\":" + JSON.writeValueAsString(home.toString()) + ",\"detach\":false}";
        String curl = "curl -sN --unix-socket '" + bed.socket + "' -X POST -H 'Content-Type: application/json'"
                + " --data-binary '" + body + "' http://localhost/api/v1/jobs | sleep 600";
        return new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(), "--init-groups",
                "--", "/bin/sh", "-c", curl).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
    }

    /**
     * Waits until the job runs and its {@code yes} has been blocked on its full stdout pipe in several checks in a
     * row: nothing drains the pipe any more, so the service's write to the client is blocked.
     *
     * @return the job's id
     */
    private static String awaitStalled(ServiceBed bed, NodeService s) throws Exception {
        Caller root = ServiceBed.root();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        int blocked = 0;
        while (System.nanoTime() < until) {
            for (Map<String, Object> j : s.jobViews(root)) {
                if ("RUNNING".equals(j.get("state"))) {
                    Optional<String> state = stateOfYes(bed.jobParent);
                    blocked = state.equals(Optional.of("S")) ? blocked + 1 : 0;
                    if (blocked >= 20) {
                        return (String) j.get("id");
                    }
                }
            }
            Thread.sleep(50);
        }
        throw new AssertionError("alice's job never stalled on its client (jobs: " + s.jobViews(root) + ")");
    }

    /** @return the scheduler state (R, S, ...) of the job's {@code yes}, read from /proc */
    private static Optional<String> stateOfYes(Path parent) throws IOException {
        for (Path cg : Restarts.jobCgroups(parent)) {
            for (String pid : Files.readString(cg.resolve("cgroup.procs")).strip().split("\n")) {
                Path proc = Path.of("/proc", pid.strip());
                try {
                    if (Files.readString(proc.resolve("comm")).strip().equals("yes")) {
                        String stat = Files.readString(proc.resolve("stat"));
                        return Optional.of(stat.substring(stat.lastIndexOf(')') + 2).split(" ")[0]);
                    }
                } catch (IOException gone) {
                    // exited between the list and the read
                }
            }
        }
        return Optional.empty();
    }

    private static void assertNothingLeft(ServiceBed bed, String when) throws Exception {
        List<String> held = new ArrayList<>();
        for (Allocation a : bed.scheduler.allocations()) {
            held.add(a.id() + " of " + a.owner().orElse("?") + " GPUs " + a.deviceIndices());
        }
        List<String> cgroups =
                Restarts.jobCgroups(bed.jobParent).stream().map(p -> p.getFileName().toString()).toList();
        try {
            assertThat(held).as("allocations held " + when).isEmpty();
            assertThat(cgroups).as("job cgroups left under %s %s", bed.jobParent, when).isEmpty();
        } finally {
            for (Path cg : Restarts.jobCgroups(bed.jobParent)) { // end what was left, so the bed can be removed
                Files.writeString(cg.resolve("cgroup.kill"), "1");
            }
        }
    }

    /** Ends alice's curl and sleep (the shell's children outlive it). */
    private static void end(Process client, LocalUsers.User alice) throws Exception {
        LocalUsers.run(List.of("pkill", "-KILL", "-U", String.valueOf(alice.uid())), 30);
        client.destroyForcibly();
        client.waitFor(30, TimeUnit.SECONDS);
    }
}
