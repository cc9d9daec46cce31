package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** docs/SERVICE.md: a detached job's output stops at 64 MiB, "so a job cannot fill the state directory's disk". */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class OutputCapAttackTest {
    /**
     * The service gives the output file to the job's user (0600, owner alice) in a directory alice can traverse, so
     * alice (or her job) opens it by the name the job view tells her and appends without limit: the 64 MiB cap is the
     * service's own writes only, and any user who ran one detached job can fill the disk of the node's state
     * directory (the ledger's: /var/lib/gpusched), as root's file system, not her home's quota.
     */
    @Test
    void theOwnerOfADetachedJobCannotGrowItsOutputFilePastTheCap(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, DetachedJobs.config()).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            JsonNode job = DetachedJobs.detach(bed, alice, DetachedJobs.home(tmp, alice), "echo started");
            String id = job.path("id").asText();
            Path out = Path.of(job.path("output").asText());
            DetachedJobs.awaitOver(bed, alice, id);
            // alice, from a login shell, appends a little more than the cap to "her" output file
            LocalUsers.Result r = LocalUsers.runAs(alice, List.of("/bin/sh", "-c",
                    "head -c " + (DetachedJobs.CAP + (2L << 20)) + " /dev/zero >> \"$1\"", "sh", out.toString()), 120);
            long size = Files.size(out);
            assertThat(size).as("alice's write to %s exited %d (%s): the file is %d bytes, past the service's cap of"
                    + " %d", out, r.exit(), r.err().strip(), size, DetachedJobs.CAP)
                    .isLessThanOrEqualTo(DetachedJobs.CAP + DetachedJobs.CAP_LINE);
        }
    }
}
