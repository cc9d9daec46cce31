package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Event streams run on workers of their own ({@code threads + maxSseClients}, see ConsoleWorkers) and are bounded by
 * {@code maxSseClients} and {@code maxEventStreamsPerClient}; but the events route calls {@code keepOpen}, which now
 * also takes a slot of {@code maxHeldRequests}. So one ordinary user's event streams (within her own per-client bound)
 * take every slot of requests held open, and every other user's wait for GPUs is refused {@code 429 RATE_LIMITED
 * maxHeldRequests} for as long as her streams stay open: the bound meant to keep workers for everyone becomes a way
 * for one user to lock everyone out of the queue. Real users, curl on the node socket; 8 workers, so 6 slots.
 */
@Tag("adversarial")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class EventStreamsTakeHeldSlotsAttackTest {

    private static List<String> as(LocalUsers.User u, String... curl) {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(),
                "--init-groups", "--", "curl"));
        cmd.addAll(List.of(curl));
        return cmd;
    }

    @Test
    void oneUsersEventStreamsDoNotLockEveryoneElseOutOfTheQueue(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: making users needs root, useradd and setpriv");
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            LocalUsers.User mallory = bed.accounts.user("mallory");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve(b -> b.threads(8).maxSseClients(8));

            int held = 8 - Math.max(1, 8 / 4);
            Allocation all = bed.scheduler.allocate(GpuRequests.fromCliFlags(List.of("--gpu=8")));
            List<Process> procs = new ArrayList<>();
            try {
                // mallory opens as many event streams as maxHeldRequests: under her own bound of 8 streams
                for (int i = 0; i < held; i++) {
                    Process p = new ProcessBuilder(as(mallory, "-sS", "-N", "-D", "-", "--unix-socket",
                            bed.socket.toString(), "http://localhost/api/v1/events")).redirectErrorStream(true).start();
                    procs.add(p);
                    BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                            StandardCharsets.UTF_8));
                    String status = r.readLine();
                    assertThat(status).as("mallory's event stream " + i).startsWith("HTTP/1.1 200");
                }
                // bob waits for a GPU: the queue should take him (a worker is free: streams have their own)
                Process wait = new ProcessBuilder(as(bob, "-sS", "-w", "\n%{http_code}", "--unix-socket",
                        bed.socket.toString(), "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"],\"wait\":\"10m\"}",
                        "http://localhost/api/v1/allocations")).redirectErrorStream(true).start();
                procs.add(wait);
                for (int i = 0; i < 6000 && wait.isAlive() && bed.service.queueView().isEmpty(); i++) {
                    Thread.sleep(10);
                }
                String answer = wait.isAlive() ? "(still waiting)"
                        : new String(wait.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertThat(bed.service.queueView()).as("bob's wait, queued while mallory's " + held
                        + " event streams are open; his answer: " + answer).hasSize(1);
            } finally {
                procs.forEach(Process::destroyForcibly);
                bed.scheduler.release(all.id());
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
            }
        }
    }
}
