package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The slots of {@code maxHeldRequests} come back exactly once: after waits whose clients were SIGKILLed while queued
 * and waits refused after {@code keepOpen} (more GPUs than the node has), a fresh round of waits is held up to the
 * bound again, and no further: a leak would refuse them early, a double release would hold more than the bound.
 * Real users, curl on the node socket; 8 workers, so 6 slots.
 */
@Tag("adversarial")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class HeldSlotsComeBackExactlyAttackTest {
    private static final String WAIT = "{\"flags\":[\"--gpu=1\"],\"wait\":\"10m\"}";

    private static Process post(LocalUsers.User u, Path socket, String body) throws IOException {
        return new ProcessBuilder("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(), "--init-groups", "--", "curl",
                "-sS", "-w", "\n%{http_code}", "--unix-socket", socket.toString(), "-X", "POST", "--data", body,
                "http://localhost/api/v1/allocations").redirectErrorStream(true).start();
    }

    private static void until(BooleanSupplier c) throws InterruptedException {
        for (int i = 0; i < 6000 && !c.getAsBoolean(); i++) { // up to 60 s: a loaded machine
            Thread.sleep(10);
        }
    }

    @Test
    void slotsComeBackOnceAfterKilledClientsAndRefusedWaits(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: making users needs root, useradd and setpriv");
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve(b -> b.threads(8).maxSseClients(1));
            int held = 8 - Math.max(1, 8 / 4);
            Allocation all = bed.scheduler.allocate(GpuRequests.fromCliFlags(List.of("--gpu=8")));
            List<Process> procs = new ArrayList<>();
            try {
                for (int round = 0; round < 3; round++) {
                    List<Process> killed = new ArrayList<>();
                    for (int i = 0; i < held; i++) {
                        killed.add(post(alice, bed.socket, WAIT));
                    }
                    procs.addAll(killed);
                    until(() -> bed.service.queueView().size() >= held);
                    assertThat(bed.service.queueView()).as("round " + round + ": alice's waits held").hasSize(held);
                    killed.forEach(Process::destroyForcibly); // SIGKILL: no goodbye
                    until(() -> bed.service.queueView().isEmpty());
                    assertThat(bed.service.queueView()).as("killed clients' waits dropped").isEmpty();
                    for (int i = 0; i < 4; i++) { // refused after keepOpen took its slot
                        Process p = post(bob, bed.socket, "{\"flags\":[\"--gpu=99\"],\"wait\":\"10m\"}");
                        procs.add(p);
                        String a = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                        assertThat(a).as("more GPUs than the node has").doesNotEndWith("\n201")
                                .doesNotEndWith("\n000");
                    }
                }
                List<Process> fresh = new ArrayList<>();
                for (int i = 0; i < held + 2; i++) {
                    fresh.add(post(i % 2 == 0 ? alice : bob, bed.socket, WAIT));
                }
                procs.addAll(fresh);
                until(() -> fresh.stream().filter(p -> !p.isAlive()).count() + bed.service.queueView().size() >= held
                        + 2);
                assertThat(bed.service.queueView()).as("a fresh round: held up to the bound, exactly").hasSize(held);
                for (Process p : fresh) {
                    if (!p.isAlive()) {
                        String a = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                        assertThat(a).endsWith("\n429").contains("maxHeldRequests");
                    }
                }
            } finally {
                procs.forEach(Process::destroyForcibly);
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
            }
        }
    }
}
