package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a stop refuses is audited. docs/SERVICE.md, Audit: "one JSON line per change and per refusal"; SIGTERM "drops
 * every waiting request ({@code 503 SHUTTING_DOWN})". {@code NodeService.close()} drops the queue's waiters and closes
 * the audit a moment later; each waiter's refusal is recorded by its own caller's thread once it wakes, and since
 * {@code AuditLog} no longer reopens its file once closed (9fbd91db) a refusal recorded after that goes to the log
 * only: requests the service answered {@code 503} are missing from {@code audit.log}.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StopAuditsWhatItRefusedAttackTest {
    private static final Caller ALICE = ServiceBed.caller("alice", 5001, false, "alice");
    private static final Caller BOB = ServiceBed.caller("bob", 5002, false, "bob");
    private static final int WAITERS = 16;

    @Test
    void everyWaiterTheStopRefusedHasItsRefusalInTheAudit(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                .withAdminGroup("gsu-nonexistent")).build();
        ExecutorService ex = Executors.newFixedThreadPool(WAITERS);
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Allocation all = s.allocate(BOB, GpuRequests.fromCliFlags("--gpu=8"), Optional.empty(), () -> false);
            assertThat(all.deviceIndices()).hasSize(8);
            List<Future<Allocation>> waiters = new ArrayList<>();
            for (int i = 0; i < WAITERS; i++) {
                waiters.add(ex.submit(() -> s.allocate(ALICE, GpuRequests.fromCliFlags("--gpu=1"), Optional.of(
                        Duration.ofMinutes(5)), () -> false)));
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (s.queueView().size() < WAITERS && System.nanoTime() < until) {
                Thread.sleep(10);
            }
            assertThat(s.queueView()).as("alice's requests waiting").hasSize(WAITERS);
            s.close();
            int refused = 0;
            for (Future<Allocation> w : waiters) {
                try {
                    w.get(60, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    refused++;
                }
            }
            assertThat(refused).as("waiters the stop refused").isEqualTo(WAITERS);
            List<String> lines = Files.readAllLines(bed.state.resolve("audit.log"));
            long audited = lines.stream().filter(l -> l.contains("\"user\":\"alice\"") && l.contains(
                    "\"action\":\"allocate\"") && !l.contains("\"result\":\"ok\"")).count();
            assertThat(audited).as("refusals of alice's waits in audit.log (%d answered by the stop); the file:%n%s",
                    refused, String.join("\n", lines)).isEqualTo(refused);
        } finally {
            ex.shutdownNow();
        }
    }
}
