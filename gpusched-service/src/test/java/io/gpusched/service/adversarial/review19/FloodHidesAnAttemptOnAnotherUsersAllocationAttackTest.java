package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review19: the audit's per-uid budget (AuditLog, 21060ae1) lets a user choose which of her refusals are itemized.
 * Alice first spends her burst of 100 itemized refusals on harmless ones (DELETEs of allocation ids that do not
 * exist, one curl, one connection, well under a second), then tries to release bob's allocation: refused 403, and
 * the audit keeps only "release FORBIDDEN 1" in a count line, without the allocation she went for (nor bob's name,
 * nor when within the minute). Review17's defect was that her attempt on bob's allocation could be erased by a
 * flood; now it can be reduced to a number by a flood made just before it. An attempt on another user's allocation is
 * what the audit is for: it should be itemized whatever the flood before it.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class FloodHidesAnAttemptOnAnotherUsersAllocationAttackTest {

    @Test
    void anAttemptOnBobsAllocationRightAfterAFloodOfHarmlessRefusalsIsStillItemized(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            Answer b = bed.post(bob, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}");
            assertThat(b.status()).as(b.body()).isEqualTo(201);
            String bobs = Clients.JSON.readTree(b.body()).path("id").asText();

            LocalUsers.Result flood = LocalUsers.runAs(alice, List.of("curl", "-s", "-o", "/dev/null",
                    "--unix-socket", bed.socket.toString(), "-X", "DELETE",
                    "http://localhost/api/v1/allocations/no-such-allocation-[1-150]"), 120);
            assertThat(flood.exit()).as(flood.err()).isZero();
            Answer probe = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/" + bobs);
            assertThat(probe.status()).as(probe.body()).isEqualTo(403);

            Path audit = bed.state.resolve("audit.log");
            bed.close(); // what was counted is written at the stop
            List<String> lines;
            try (Stream<String> s = Files.lines(audit)) {
                lines = s.filter(l -> l.contains("\"uid\":" + alice.uid() + ",")).toList();
            }
            String suppressed = lines.stream().filter(l -> l.contains("audit.suppressed")).findFirst().orElse(
                    "(none)");
            assertThat(lines.stream().filter(l -> l.contains("\"action\":\"release\"") && l.contains("\"subject\":\""
                    + bobs + "\"")).count()).as("lines of the audit naming alice's attempt on bob's allocation %s"
                            + " (%d lines of alice's; her count line: %s)", bobs, lines.size(), suppressed)
                    .isOne();
        }
    }
}
