package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers.User;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job runs as the user who starts it and its GPUs are that user's: root (an admin) naming another owner for a job is
 * refused, {@code 400 INVALID_REQUEST} naming the owner and why, and nothing is allocated or run (the name was once
 * dropped without a word, the job's allocation owned by root: review29's note).
 */
class JobOwnerTest {

    @Test
    void anAdminsJobNamingAnotherOwnerIsRefusedAndNothingIsAllocated(@TempDir Path tmp) throws Exception {
        ServiceSocketTest.needCurl();
        try (ServiceBed bed = new ServiceBed(tmp, ServiceJobsTest.config(List.of())).jobs()) {
            User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            String body = "{\"flags\":[\"--gpu=1\",\"--owner=" + bob.name() + "\"],\"argv\":[\"/bin/true\"],"
                    + "\"env\":{},\"cwd\":\"/\"}";
            Answer a = bed.curl(new User("root", 0, 0), "-X", "POST", "--data", body, "http://localhost/api/v1/jobs");
            assertThat(a.status()).as(a.body()).isEqualTo(400);
            assertThat(a.body()).contains("INVALID_REQUEST").contains("--owner " + bob.name())
                    .contains("runs as the user who starts it");
            assertThat(LedgerReader.read(bed.state).live).as("nothing allocated").isEmpty();
        }
    }
}
