package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/** What the attacks on detached jobs share: a config, a home, a detached job started with curl as a user. */
final class DetachedJobs {
    private DetachedJobs() {
    }

    static final ObjectMapper JSON = new ObjectMapper();
    /** The service's documented cap on a detached job's output (64 MiB) and the one line it adds past it. */
    static final long CAP = 64L << 20;
    static final long CAP_LINE = 200;

    static GpuConfig config() {
        return GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                .withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
    }

    static String home(Path tmp, LocalUsers.User u) throws Exception {
        Path d = Files.createDirectories(tmp.resolve("home-" + u.name()));
        LocalUsers.run(List.of("/bin/chown", u.uid() + ":" + u.gid(), d.toString()), 30);
        return d.toString();
    }

    static JsonNode detach(ServiceBed bed, LocalUsers.User u, String cwd, String script) throws Exception {
        String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sh\",\"-c\"," + JSON.writeValueAsString(script)
                + "],\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":" + JSON.writeValueAsString(cwd)
                + ",\"detach\":true}";
        Answer a = bed.curl(u, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body,
                "http://localhost/api/v1/jobs");
        assertThat(a.status()).as(a.body()).isEqualTo(201);
        return JSON.readTree(a.body());
    }

    static JsonNode awaitOver(ServiceBed bed, LocalUsers.User u, String id) throws Exception {
        for (int i = 0; i < 600; i++) {
            JsonNode j = JSON.readTree(bed.curl(u, "http://localhost/api/v1/jobs/" + id).body());
            String s = j.path("state").asText();
            if (!s.equals("QUEUED") && !s.equals("RUNNING")) {
                return j;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("job " + id + " did not end");
    }

    static void assertRefused(Answer a) {
        assertThat(a.status()).as(a.body()).isBetween(400, 499);
    }
}
