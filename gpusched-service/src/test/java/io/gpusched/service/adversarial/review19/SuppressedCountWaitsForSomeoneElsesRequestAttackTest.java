package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review19: docs/SERVICE.md (Audit) says a user's refusals past the burst are counted into one {@code audit.suppressed}
 * line "written before that user's next itemized line, after a minute, or when the service stops". "After a minute"
 * is only looked at inside AuditLog.record (its sweep), that is when some user's next request is audited: on a quiet
 * node the count stays in the service's memory for as long as nobody asks anything, not in audit.log; a crash (OOM
 * kill, power loss) loses it, and an admin reading the audit sees none of the flood, past the first 100 lines, however
 * long ago it was. Here alice's 150 refused requests, then silence: 75 s later, no count line.
 *
 * <p>The minute is shortened to 3 s here ({@code ServiceBed.auditSummaryAfter}); the reviewer's run waited 75 s.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class SuppressedCountWaitsForSomeoneElsesRequestAttackTest {

    @Test
    void aFloodsCountIsInTheAuditAMinuteAfterItEvenOnAQuietNode(@TempDir Path tmp) throws Exception {
        Duration minute = ServiceBed.auditSummaryAfter(Duration.ofSeconds(3)); // "a minute", shortened for the test
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            LocalUsers.Result flood = LocalUsers.runAs(alice, List.of("curl", "-s", "-o", "/dev/null",
                    "--unix-socket", bed.socket.toString(), "-X", "DELETE",
                    "http://localhost/api/v1/allocations/no-such-allocation-[1-150]"), 120);
            assertThat(flood.exit()).as(flood.err()).isZero();
            Path audit = bed.state.resolve("audit.log");
            long itemized = Files.readAllLines(audit).stream().filter(l -> l.contains("\"uid\":" + alice.uid() + ","))
                    .count();
            assertThat(itemized).as("alice's itemized refusals (the burst)").isLessThan(150);
            boolean counted = Clients.await(() -> {
                try {
                    return Files.readString(audit).contains("audit.suppressed");
                } catch (java.io.IOException e) {
                    return false;
                }
            }, 30);
            assertThat(counted).as("an audit.suppressed line for alice's %d refusals not itemized, 30 s after them"
                    + " (nobody asked anything since; counts are written after 3 s here)", 150 - itemized).isTrue();
            assertThat(ServiceBed.auditedRefusals(audit)).as("refusals in the audit, by uid, before any stop")
                    .containsEntry(alice.uid(), 150L);
        } finally {
            ServiceBed.auditSummaryAfter(minute);
        }
    }
}
