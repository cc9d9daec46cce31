package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** docs/SERVICE.md: only a job's owner and admins read, signal or cancel it, release or renew its allocation. */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class NeighbourJobAccessAttackTest {
    /**
     * Bob, through the socket, against alice's detached job and its allocation: the id plain, percent-encoded and with
     * a trailing slash; every answer refuses (403 or 404) and alice's job keeps running with its GPU held.
     */
    @Test
    void aNeighbourCannotReachAnotherUsersDetachedJobByAnySpellingOfItsId(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            JsonNode job = DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice), "echo secret; sleep 600");
            String id = job.path("id").asText();
            String alloc = job.path("allocationId").asText();
            assertThat(alloc).isNotBlank();
            StringBuilder enc = new StringBuilder();
            for (char ch : id.toCharArray()) {
                enc.append('%').append(String.format("%02X", (int) ch));
            }
            String base = "http://localhost/api/v1";
            for (String jid : List.of(id, enc.toString())) {
                DetachedJobs.assertRefused(bed.curl(bob, "-X", "DELETE", base + "/jobs/" + jid));
                DetachedJobs.assertRefused(bed.curl(bob, "-X", "POST", "--data-binary", "{\"signal\":\"KILL\"}",
                        base + "/jobs/" + jid + "/signal"));
                Answer logs = bed.curl(bob, base + "/jobs/" + jid + "/logs");
                DetachedJobs.assertRefused(logs);
                assertThat(logs.body()).doesNotContain("secret");
                JsonNode seen = DetachedJobs.JSON.readTree(bed.curl(bob, base + "/jobs/" + jid).body());
                assertThat(seen.path("output").isNull()).as(seen.toString()).isTrue();
                assertThat(seen.path("argv").isNull()).as(seen.toString()).isTrue();
            }
            StringBuilder aenc = new StringBuilder();
            for (char ch : alloc.toCharArray()) {
                aenc.append('%').append(String.format("%02X", (int) ch));
            }
            for (String aid : List.of(alloc, aenc.toString(), alloc + "/")) {
                DetachedJobs.assertRefused(bed.curl(bob, "-X", "DELETE", base + "/allocations/" + aid));
                DetachedJobs.assertRefused(bed.curl(bob, "-X", "POST", "--data-binary", "{\"lease\":\"1s\"}",
                        base + "/allocations/" + aid + "/renew"));
            }
            assertThat(DetachedJobs.JSON.readTree(bed.curl(alice, base + "/jobs/" + id).body()).path("state").asText())
                    .isEqualTo("RUNNING");
            assertThat(LedgerReader.read(bed.state).live).hasSize(1);
            assertThat(bed.curl(null, "-X", "DELETE", base + "/jobs/" + id).status()).isEqualTo(200);
        }
    }
}
