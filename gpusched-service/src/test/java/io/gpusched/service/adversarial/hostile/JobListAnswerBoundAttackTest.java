package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Answers on the service socket are bounded (issue 36), and the client reads an answer whole up to 16 MiB
 * (docs/SERVICE.md, The client). One user's 20 refused jobs (kept per user) with ~1 MB of argv each must not make
 * root's {@code GET /api/v1/jobs} larger than what {@code gpusched jobs} (ServiceClient) reads: an attack that held
 * when written.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class JobListAnswerBoundAttackTest {
    private static final long CLIENT_LIMIT = 16L * 1024 * 1024;

    @Test
    void oneUsersRefusedJobsDoNotMakeTheJobListOverTheClientsLimit(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                .withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            LocalUsers.User mallory = bed.accounts.user("mallory");
            bed.start();
            bed.serve();
            StringBuilder argv = new StringBuilder("[\"/bin/true\"");
            for (int i = 0; i < 8; i++) {
                argv.append(",\"").append(String.valueOf((char) ('a' + i)).repeat(125_000)).append('"');
            }
            String body = "{\"flags\":[\"--gpu=9\"],\"argv\":" + argv + "],\"env\":{},\"cwd\":\"/\",\"detach\":true}";
            assertThat(body.length()).isLessThan(1 << 20);
            Path file = Files.writeString(tmp.resolve("job.json"), body);
            List<String> args = new ArrayList<>(List.of("-X", "POST", "-H",
                    "Content-Type: application/json", "--data-binary", "@" + file));
            for (int i = 0; i < 20; i++) {
                args.add("http://localhost/api/v1/jobs");
            }
            Answer refused = bed.curl(mallory, args.toArray(String[]::new));
            assertThat(refused.status()).as(refused.body()).isBetween(400, 499);
            Answer all = bed.curl(null, "http://localhost/api/v1/jobs");
            assertThat(all.status()).isEqualTo(200);
            assertThat((long) all.body().length()).as("bytes of root's GET /api/v1/jobs after one user's 20 refused"
                    + " jobs (the client reads at most %d)", CLIENT_LIMIT).isLessThanOrEqualTo(CLIENT_LIMIT);
        }
    }
}
