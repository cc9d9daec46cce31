package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review18: "a waiting job cancelled by its owner/admin ends its stream with 409 CANCELLED" (commit 74b30b39), and
 * every refusal is typed (issue 33). An attached job that does not wait is cancelled by its owner (from another
 * terminal: {@code gpusched cancel}) while its GPUs are being allocated: here the node's ledger is busy (another
 * process of the node holds its lock, as any engine's transaction does for a moment), so the allocation takes a while.
 * {@code Jobs.cancel} sets {@code cancelled} (no ticket, nothing launched: nothing else to do); once the allocation is
 * made, {@code Jobs.run} sees {@code cancelled}, ends the job CANCELLED and returns without a word to the sink; in
 * {@code ServiceRoutes.start} nothing was thrown, so {@code sink.close()} closes an exchange nothing was sent on.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CancelledAsItsGpusAreAllocatedAttackTest {

    @Test
    void anAttachedJobCancelledByItsOwnerWhileItsGpusAreAllocatedIsAnswered409Cancelled(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/echo", "ran"),
                    "--gpu=1");
            Process client;
            Process cancel;
            String id;
            try (Held.LedgerLock busy = new Held.LedgerLock(bed.state)) {
                client = Held.post(bed, alice, Clients.JSON.writeValueAsString(m));
                assertThat(Clients.await(() -> Held.jobIn(bed, "QUEUED") != null, 60)).as(
                        "alice's job is registered, its allocation under way").isTrue();
                id = Held.jobIn(bed, "QUEUED");
                cancel = Held.curl(bed, alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + id);
                assertThat(Clients.await(() -> Held.waitingIn("io.gpusched.service.Jobs", "cancel"), 60)).as(
                        "alice's cancel came and waits for the job's end").isTrue();
            } // the ledger is free again: the allocation is made
            String answer = Held.output(client, 60);
            String cancelled = Held.output(cancel, 60);
            Map<String, Object> view = Clients.job(bed.service, id);
            assertThat(answer).as("what alice's client of job %s was told (her cancel was answered [%s]; the job: %s)",
                    id, cancelled.strip(), view).contains("STATUS:409").contains("CANCELLED");
        }
    }
}
