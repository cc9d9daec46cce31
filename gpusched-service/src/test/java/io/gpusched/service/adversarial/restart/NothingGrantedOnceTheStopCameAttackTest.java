package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Nothing is granted once the stop came. docs/SERVICE.md (SIGTERM): the stop "drops every waiting request
 * ({@code 503 SHUTTING_DOWN})" and "A grant the fair queue was making when the stop came is answered to its caller
 * (...); nothing is granted or released after that." {@code NodeService.close()} ends the jobs first and closes the
 * fair queue only after: while a job that does not die of TERM gets its kill_grace (here 5 s), the queue is open, and
 * a request that comes after the stop began is granted (the GPUs are the caller's, and the service is going away).
 *
 * <p>The stop is seen begun when alice's job, which traps TERM, writes its marker; then bob asks for one GPU of the
 * seven free, without a wait and with one.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class NothingGrantedOnceTheStopCameAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Caller BOB = ServiceBed.caller("bob", 5002, false, "bob");

    @Test
    void aRequestMadeWhileTheStopEndsTheJobsIsRefused(@TempDir Path tmp) throws Exception {
        GpuConfig config = Restarts.config(Duration.ofSeconds(5));
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Restarts.homeOf(tmp, alice);
            Path marker = home.resolve("term-seen");
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\",\"trap 'touch term-seen' TERM; touch"
                    + " ready; while :; do /bin/sleep 0.1; done\"],\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":"
                    + JSON.writeValueAsString(home.toString()) + ",\"detach\":true}";
            ServiceBed.Answer started = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", body, "http://localhost/api/v1/jobs");
            assertThat(started.status()).as("alice's job: %s", started.body()).isEqualTo(201);
            long ready = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!Files.exists(home.resolve("ready")) && System.nanoTime() < ready) {
                Thread.sleep(10); // its TERM trap is set
            }
            Thread stop = new Thread(s::close, "stop");
            stop.start();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!Files.exists(marker) && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(marker).as("alice's job was sent TERM by the stop").exists();
            List<String> granted = new ArrayList<>();
            List<Allocation> toRelease = new ArrayList<>();
            try {
                Allocation a = s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=1"), Optional.empty(), () -> false);
                toRelease.add(a);
                granted.add("without a wait: " + a.id() + " GPUs " + a.deviceIndices());
            } catch (RuntimeException refused) {
                // as the stop promises
            }
            try {
                Allocation a = s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(Duration.ofSeconds(
                        30)), () -> false);
                toRelease.add(a);
                granted.add("with a wait: " + a.id() + " GPUs " + a.deviceIndices());
            } catch (RuntimeException refused) {
                // as the stop promises
            }
            boolean stillStopping = stop.isAlive();
            stop.join(TimeUnit.SECONDS.toMillis(90));
            for (Allocation a : toRelease) {
                bed.scheduler.release(a.id());
            }
            assertThat(stillStopping).as("the stop was still under way when bob was answered").isTrue();
            assertThat(granted).as("allocations granted to bob after the stop began").isEmpty();
        }
    }
}
