package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A release refused while the stop itself runs (its audit still open: the stop waits out the kill grace of alice's job,
 * which ignores TERM). The answer is {@code 503 SHUTTING_DOWN}; its audit line's result must be that reason too, as
 * every other refusal's is (FORBIDDEN, INVALID_REQUEST, UNKNOWN_ALLOCATION...; AuditLog: "the result (ok, or the
 * refusal's reason and sentence)"). {@code NodeService.refused} names a reason only for GpuAllocationException,
 * AccessDeniedException and IllegalArgumentException, else the exception's class: {@code FairQueue.Dropped} is
 * audited as {@code "Dropped"}, a Java class name no client ever sees.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class RefusedWhileTheStopRunsAttackTest {

    @Test
    void aReleaseRefusedByTheStopIsAuditedShuttingDown(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(6))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            ServiceBed.Answer made = bed.curl(bob, "-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", "{\"flags\":[\"--gpu=1\"]}", "http://localhost/api/v1/allocations");
            assertThat(made.status()).as("bob's allocation: %s", made.body()).isEqualTo(201);
            String id = Clients.JSON.readTree(made.body()).path("id").asText();
            // TERM ignored (inherited through exec): the stop waits its kill grace, its audit open meanwhile
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "trap '' TERM; exec sleep 600")));
            Thread closer = null;
            try {
                Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> {
                    try {
                        return Clients.stateOf(bed.jobParent, "sleep").isPresent(); // TERM ignored from here on
                    } catch (java.io.IOException e) {
                        return false;
                    }
                }, 60)).as("the job's sleep runs").isTrue();
                closer = new Thread(s::close, "review11-service-close");
                closer.start();
                Thread.sleep(500);
                ServiceBed.Answer release = bed.curl(bob, "-X", "DELETE", "http://localhost/api/v1/allocations/"
                        + id);
                assertThat(closer.isAlive()).as("the stop still waits for alice's job (precondition)").isTrue();
                closer.join(TimeUnit.SECONDS.toMillis(60));
                assertThat(release.status()).as("bob's release during the stop: %s", release.body()).isEqualTo(503);
                assertThat(Clients.JSON.readTree(release.body()).path("reason").asText()).as("its reason (%s)",
                        release.body()).isEqualTo("SHUTTING_DOWN");
                List<String> audited = Clients.audited(bed, id);
                assertThat(audited).as("audit.log lines naming %s", id).anyMatch(l -> l.startsWith("release="));
                assertThat(audited).as("audit.log lines naming %s: the refused release's result", id).contains(
                        "release=SHUTTING_DOWN");
            } finally {
                Clients.cleanUp(bed, alice, client);
                if (closer != null) {
                    closer.join(TimeUnit.SECONDS.toMillis(60));
                    bed.service = null; // closed above
                }
            }
        }
    }
}
