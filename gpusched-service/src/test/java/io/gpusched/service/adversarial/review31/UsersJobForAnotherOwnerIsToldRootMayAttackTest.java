package io.gpusched.service.adversarial.review31;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review31: 9be07280 refuses a job naming another owner with 400 INVALID_REQUEST ("a job runs as the user who starts
 * it"), and SERVICE.md says so for everyone: "--owner naming anyone else is 400 INVALID_REQUEST, an admin's too". But
 * Jobs.prepare runs Access.checkOwner first, so a plain user's job naming bob is 403 FORBIDDEN, told "only root ...
 * may name another owner": untrue for a job (root is refused too, 400). Issue 33: "every refusal typed, naming who may
 * act" (truly).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UsersJobForAnotherOwnerIsToldRootMayAttackTest {

    @Test
    void aUsersJobNamingAnotherOwnerIsRefusedAsEveryonesIs(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            String body = "{\"flags\":[\"--gpu=1\",\"--owner=" + bob.name() + "\"],\"argv\":[\"/bin/true\"],"
                    + "\"env\":{},\"cwd\":\"/\"}";
            Answer root = bed.post(new LocalUsers.User("root", 0, 0), "/api/v1/jobs", body);
            Answer a = bed.post(alice, "/api/v1/jobs", body);
            assertThat(LedgerReader.read(bed.state).live).as("nothing allocated").isEmpty();
            assertThat(root.status()).as("root's job naming bob: %s", root.body()).isEqualTo(400);
            assertThat(a.status() == 400 && a.body().contains("INVALID_REQUEST") && !a.body().contains(
                    "only root")).as("alice's job naming bob (SERVICE.md: 400 INVALID_REQUEST, an admin's too; root's"
                            + " own answer was %s %s): %s %s", root.status(), root.body(), a.status(), a.body())
                    .isTrue();
        }
    }
}
