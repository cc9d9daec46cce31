package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.OwnThread;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a real user's client gets when the service stops as {@code gpusched serve} stops it on SIGTERM: the service
 * first, then the console ({@code ServiceBed.close()} does the same). docs/SERVICE.md: "SIGTERM ends every job (TERM,
 * KILL after kill_grace), drops every waiting request ({@code 503 SHUTTING_DOWN}) ..."; an attached job's stream ends
 * with {@code {"type":"exit",...}} (or {@code {"type":"error",...}} when it fails after the answer began). Serve used
 * to close the console first: the connections were cut before the service could answer (the waiting client got an
 * empty reply, the attached client's stream ended without its last line). With the service closed first, the console
 * must also let those answers finish ({@code ConsoleServer.CLOSE_GRACE}) rather than cut them.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class StopEndsClientsAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static GpuConfig config() {
        return Restarts.config(Duration.ofMillis(300));
    }

    /** Closes as serve does on SIGTERM: the service, then the console. */
    private static void stopAsServeDoes(ServiceBed bed) {
        bed.service.close();
        bed.console.close();
        bed.console = null; // closed: the bed's own close closes the scheduler and removes the rest
        bed.service = null;
    }

    @Test
    void aWaitingRequestIsAnswered503ShuttingDownWhenTheServiceStops(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config())) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User bob = bed.accounts.user("bob");
            Caller root = ServiceBed.root();
            s.allocate(root, GpuRequest.builder().count(8).build(), Optional.empty(), () -> false); // the node full
            CompletableFuture<String> answer = OwnThread.supply(() -> {
                try {
                    ServiceBed.Answer a = bed.curl(bob, "-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", "{\"flags\":[\"--gpu=1\"],\"wait\":\"2m\"}",
                            "http://localhost/api/v1/allocations");
                    return a.status() + " " + a.body();
                } catch (Exception e) {
                    return "no answer: " + e.getMessage();
                }
            });
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (s.queueView().isEmpty() && System.nanoTime() < until) {
                Thread.sleep(20);
            }
            assertThat(s.queueView()).as("bob's request waits").hasSize(1);
            stopAsServeDoes(bed);
            String got = answer.get(90, TimeUnit.SECONDS);
            assertThat(got).as("what bob's waiting client got when the service stopped").startsWith("503 ")
                    .contains("SHUTTING_DOWN");
        }
    }

    @Test
    void anAttachedJobsStreamEndsWithItsLastLineWhenTheServiceStops(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config()).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Restarts.homeOf(tmp, alice);
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sleep\",\"600\"],\"env\":{\"PATH\":"
                    + "\"/usr/bin:/bin\"},\"cwd\":" + JSON.writeValueAsString(home.toString()) + ",\"detach\":false}";
            CompletableFuture<String> stream = OwnThread.supply(() -> {
                try {
                    ServiceBed.Answer a = bed.curl(alice, "-N", "-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", body, "http://localhost/api/v1/jobs");
                    return a.body();
                } catch (Exception e) {
                    return "curl failed: " + e.getMessage();
                }
            });
            Caller root = ServiceBed.root();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            boolean running = false;
            while (!running && System.nanoTime() < until) {
                for (Map<String, Object> j : s.jobViews(root)) {
                    running |= "RUNNING".equals(j.get("state"));
                }
                Thread.sleep(20);
            }
            assertThat(running).as("alice's attached job runs").isTrue();
            stopAsServeDoes(bed);
            String got = stream.get(120, TimeUnit.SECONDS);
            String last = got.lines().map(String::strip).filter(l -> !l.isEmpty()).reduce((a, b) -> b).orElse("");
            assertThat(last).as("the last line of alice's attached stream (all of it: %s)", got)
                    .containsAnyOf("\"type\":\"exit\"", "\"type\":\"error\"");
        }
    }
}
