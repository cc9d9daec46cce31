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
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Requests that wait for GPUs each hold a worker thread of the console for as long as they wait (the routes are
 * synchronous handlers), and so does an attached job's output. Per client they are bounded (maxRequestsPerClient),
 * but not all together: enough users' waits took every worker, and then no one's {@code status}, {@code release} or
 * {@code whoami} was answered until a GPU came free. Now at most {@code maxHeldRequests} (three quarters of the
 * workers) are held; past it a wait is refused at once with {@code RATE_LIMITED} naming the limit, and the other
 * workers stay for everything else. Real users, curl on the node socket; a console of 8 workers so that a few
 * requests show it.
 */
@Tag("adversarial")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class ServiceHeldRequestsAttackTest {
    private static final int EACH = 8;

    private static Process waitAs(LocalUsers.User u, Path socket) throws IOException {
        return new ProcessBuilder("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(), "--init-groups", "--", "curl",
                "-sS", "-w", "\n%{http_code}", "--unix-socket", socket.toString(), "-X", "POST", "--data",
                "{\"flags\":[\"--gpu=1\"],\"wait\":\"10m\"}", "http://localhost/api/v1/allocations")
                .redirectErrorStream(true).start();
    }

    private static String answer(Process p) throws Exception {
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return out;
    }

    @Test
    void waitsOfManyUsersLeaveWorkersForEveryoneElseAndPastTheBoundAreRefusedNamingIt(@TempDir Path tmp)
            throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: making users needs root, useradd and setpriv");
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            LocalUsers.User carol = bed.accounts.user("carol");
            bed.start();
            bed.serve(b -> b.threads(8).maxSseClients(1));

            Allocation all = bed.scheduler.allocate(GpuRequests.fromCliFlags(List.of("--gpu=8")));
            List<Process> waits = new ArrayList<>();
            try {
                for (int i = 0; i < EACH; i++) {
                    waits.add(waitAs(alice, bed.socket));
                    waits.add(waitAs(bob, bed.socket));
                }
                // every request is either queued or answered (refused) before going on
                long exited = 0;
                for (int i = 0; i < 6000; i++) { // up to 60 s: a loaded machine
                    exited = waits.stream().filter(p -> !p.isAlive()).count();
                    if (exited + bed.service.queueView().size() >= 2 * EACH) {
                        break;
                    }
                    Thread.sleep(10);
                }
                int held = 8 - Math.max(1, 8 / 4);
                assertThat(bed.service.queueView()).as("waits held open: maxHeldRequests of 8 workers").hasSize(held);
                assertThat(exited).as("refused at once").isEqualTo(2 * EACH - held);
                List<Process> heldOnes = new ArrayList<>();
                int refused = 0;
                for (Process p : waits) {
                    if (p.isAlive()) {
                        heldOnes.add(p);
                    } else {
                        String a = answer(p);
                        assertThat(a).as("a refused wait").endsWith("\n429").contains("RATE_LIMITED")
                                .contains("maxHeldRequests");
                        refused++;
                    }
                }
                assertThat(refused).isEqualTo(2 * EACH - held);
                assertThat(heldOnes).hasSize(held);

                // everyone else is still served: carol's whoami and queue, root's metrics
                ServiceBed.Answer who = bed.curl(carol, "http://localhost/api/v1/whoami");
                assertThat(who.status()).as(who.body()).isEqualTo(200);
                assertThat(who.body()).contains(carol.name());
                ServiceBed.Answer queue = bed.curl(carol, "http://localhost/api/v1/queue");
                assertThat(queue.status()).as(queue.body()).isEqualTo(200);
                ServiceBed.Answer metrics = bed.curl(null, "http://localhost/metrics");
                assertThat(metrics.body()).contains("gpusched_console_refused_total{limit=\"maxHeldRequests\"} "
                        + (2 * EACH - held) + ".0");

                // the GPUs come free: the held waits are served, and their slots come back
                bed.scheduler.release(all.id());
                for (Process p : heldOnes) {
                    assertThat(answer(p)).as("a held wait, served").endsWith("\n201");
                }
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
                all = bed.scheduler.allocate(GpuRequests.fromCliFlags(List.of("--gpu=8")));
                List<Process> again = new ArrayList<>();
                for (int i = 0; i < held; i++) {
                    again.add(waitAs(i % 2 == 0 ? alice : bob, bed.socket));
                }
                for (int i = 0; i < 6000 && bed.service.queueView().size() < held; i++) {
                    Thread.sleep(10);
                }
                assertThat(bed.service.queueView()).as("every slot came back once its wait ended").hasSize(held);
                again.forEach(Process::destroy);
                for (int i = 0; i < 6000 && !bed.service.queueView().isEmpty(); i++) {
                    Thread.sleep(10);
                }
                assertThat(bed.service.queueView()).as("a vanished client's wait is dropped").isEmpty();
                waits.addAll(again);
            } finally {
                waits.forEach(Process::destroyForcibly);
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
            }
        }
    }

    /**
     * A detached job that does not wait is answered as soon as it started or was refused, like a plain allocation: it
     * holds no slot. It took one, so with the slots full of others' waits it was refused RATE_LIMITED instead of being
     * tried.
     */
    @Test
    void aDetachedJobThatDoesNotWaitIsTriedWhileWaitsFillEverySlot(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).build();
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User carol = bed.accounts.user("carol");
            bed.start();
            bed.serve(b -> b.threads(8).maxSseClients(1));
            int held = 8 - Math.max(1, 8 / 4);
            bed.scheduler.allocate(GpuRequests.fromCliFlags(List.of("--gpu=8")));
            List<Process> waits = new ArrayList<>();
            try {
                for (int i = 0; i < held; i++) {
                    waits.add(waitAs(alice, bed.socket));
                }
                for (int i = 0; i < 6000 && bed.service.queueView().size() < held; i++) { // up to 60 s
                    Thread.sleep(10);
                }
                assertThat(bed.service.queueView()).as("every held slot taken").hasSize(held);
                String job = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/true\"],\"env\":{\"PATH\":\"/usr/bin:/bin\"},"
                        + "\"cwd\":\"/\",\"detach\":true}";
                ServiceBed.Answer a = bed.curl(carol, "-X", "POST", "--data", job, "http://localhost/api/v1/jobs");
                assertThat(a.body()).as("tried, not refused for a slot").doesNotContain("maxHeldRequests");
                assertThat(a.status()).as("every GPU is root's: refused for the GPUs, %s", a.body()).isEqualTo(409);
                assertThat(bed.service.queueView()).as("the waits still held").hasSize(held);
            } finally {
                waits.forEach(Process::destroyForcibly);
                for (Allocation a : bed.scheduler.allocations()) {
                    bed.scheduler.release(a.id());
                }
            }
        }
    }
}
