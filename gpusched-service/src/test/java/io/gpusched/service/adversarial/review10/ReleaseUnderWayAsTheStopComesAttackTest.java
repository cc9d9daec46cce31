package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A release under way as the stop comes: alice releases the allocation of her attached job, whose process ignores
 * TERM, so the release (a cancel of the job) takes the kill grace; the stop comes meanwhile. docs/SERVICE.md: "those
 * under way when it came end, audited, before the audit closes". The release's answer must agree with the ledger (its
 * GPU free once it says released), and the release must be in audit.log.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ReleaseUnderWayAsTheStopComesAttackTest {

    @Test
    void aReleaseUnderWayAsTheStopComesIsAnsweredAndAudited(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(4))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "trap '' TERM; exec sleep 600")));
            Thread closer = null;
            Thread releaser = null;
            try {
                String job = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> {
                    try {
                        return Clients.stateOf(bed.jobParent, "sleep").isPresent(); // TERM ignored from here on
                    } catch (java.io.IOException e) {
                        return false;
                    }
                }, 60)).as("the job's sleep runs").isTrue();
                Map<String, Object> view = Clients.job(s, job);
                String id = String.valueOf(view.get("allocationId"));
                AtomicReference<Object> answer = new AtomicReference<>();
                releaser = new Thread(() -> {
                    try {
                        answer.set(bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/" + id));
                    } catch (Exception e) {
                        answer.set(e);
                    }
                }, "review11-release");
                releaser.start();
                Thread.sleep(1000); // the release waits out the kill grace of the job
                closer = new Thread(s::close, "review11-service-close");
                closer.start();
                releaser.join(TimeUnit.SECONDS.toMillis(60));
                closer.join(TimeUnit.SECONDS.toMillis(60));
                assertThat(answer.get()).as("the release's answer").isInstanceOf(ServiceBed.Answer.class);
                ServiceBed.Answer a = (ServiceBed.Answer) answer.get();
                List<String> audited = Clients.audited(bed, id);
                assertThat(a.status()).as("alice's release of %s under way as the stop came: %s (audit: %s)", id, a
                        .body(), audited).isEqualTo(200);
                assertThat(Clients.JSON.readTree(a.body()).path("released").asBoolean()).as("released: %s", a.body())
                        .isTrue();
                assertThat(bed.scheduler.allocation(id)).as("%s on the ledger after the answer said released", id)
                        .isEmpty();
                assertThat(audited).as("audit.log lines naming %s", id).contains("release=ok");
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
