package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.charset.StandardCharsets;
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
 * Review17: the disk of the state directory, filled by one user's detached jobs that are still running. The per-user
 * output budget ({@code Jobs.keepOutputBytes}, 256 MiB: "so one user's 100 kept jobs cannot hold 6.4 GiB there
 * either", docs/SERVICE.md) is applied in {@code Jobs.trim} to ended jobs only ({@code if (!j.over()) continue;}), and
 * nothing bounds how many detached jobs one user runs at once: without a quota ({@code gpu.users.max_gpus: 0}, the
 * default) and with {@code --shared=1GB}, one user runs 16 jobs per 16 GB GPU, 128 on a DGX-1, each writing up to its
 * 64 MiB cap into root's {@code <state dir>/jobs}: 8 GiB, and each holds a relay thread pair and an open file.
 *
 * <p>Here, with the budget shrunk to 100,000 bytes: twelve shared detached jobs of alice's (more than the node's eight
 * GPUs) each write 20,000 bytes and stay running; root's state directory then held 240,000 bytes of alice's output.
 * Now it holds the budget's 100,000 and, in each job whose output was cut, one line saying so.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class LiveDetachedJobsOutputBudgetAttackTest {

    @Test
    void oneUsersRunningDetachedJobsHoldNoMoreOutputThanTheBudget(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(100_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Path home = Clients.homeOf(tmp, alice);
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                Map<String, Object> m = Clients.jobRequest(home, List.of("/bin/sh", "-c",
                        "head -c 20000 /dev/zero; exec sleep 120"), "--gpu=1", "--shared=1GB");
                m.put("detach", true);
                Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
                assertThat(a.status()).as(a.body()).isEqualTo(201);
                JsonNode j = Clients.JSON.readTree(a.body());
                ids.add(j.path("id").asText());
            }
            Path out = bed.state.resolve("jobs");
            long held = 0;
            int done = 0;
            // until each job's 20,000 bytes are written or cut (its file then ends with the line saying so)
            for (int i = 0; i < 600 && done < ids.size(); i++) {
                held = 0;
                done = 0;
                for (String id : ids) {
                    Path f = out.resolve(id + ".out");
                    byte[] b = Files.exists(f) ? Files.readAllBytes(f) : new byte[0];
                    held += b.length;
                    done += b.length >= 20_000 || new String(b, StandardCharsets.ISO_8859_1).contains("[gpusched: ")
                            ? 1 : 0;
                }
                Thread.sleep(100);
            }
            assertThat(done).as("alice's jobs whose output was written or cut").isEqualTo(ids.size());
            long running = bed.service.jobViews(ServiceBed.root()).stream().filter(v -> "RUNNING".equals(v.get(
                    "state"))).count();
            assertThat(running).as("alice's shared detached jobs running at once: %s", bed.service.jobViews(
                    ServiceBed.root())).isEqualTo(12);
            // the budget's bytes, and at most one line of at most 200 bytes a job saying its output was cut
            assertThat(held).as("bytes of alice's output in root's state directory, her %d detached jobs running"
                    + " (the per-user budget is 100,000 bytes)", running).isLessThanOrEqualTo(100_000 + 12 * 200);
        } finally {
            ServiceBed.keepOutputBytes(old);
        }
    }
}
