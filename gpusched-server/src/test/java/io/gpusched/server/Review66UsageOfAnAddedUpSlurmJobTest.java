package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.ManualClock;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 66. Review65's fix: {@code GET /api/v1/usage?allocation=777} adds up Slurm job 777's tracks and answers them
 * as one usage whose {@code "id"} is {@code slurm-job:777} (docs/ACCOUNTING.md: "added up as one job,
 * {@code Allocation slurm-job:<id>}"). That id is one the same endpoint then refuses: {@code ?allocation=slurm-job:777}
 * is 404 UNKNOWN_ALLOCATION ("no usage is recorded"), as {@code gpusched report slurm-job:777} is. Every other usage
 * this endpoint answers carries an id it takes back (an allocation's, a track's); a client (or the console) that
 * follows the {@code id} of an answer, or a user who copies it from {@code gpusched report 777}, is told the job has no
 * usage at all.
 */
class Review66UsageOfAnAddedUpSlurmJobTest {
    private final HttpClient http = HttpClient.newHttpClient();

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, long from, long to, int gpu) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"alice\",\"job\":\"777\",\"from\":" + from + ",\"to\":"
                + to + ",\"first\":true,\"end\":\"GONE\",\"gpus\":[{\"i\":" + gpu + ",\"uuid\":\"GPU-" + gpu
                + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held + ",\"us\":" + (50.0 * held)
                + ",\"up\":50.0,\"idle\":0,\"mp\":1073741824,\"e\":" + (held * 100) + ",\"ee\":0,\"em\":" + held
                + "}]}";
    }

    private HttpResponse<String> get(ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void theIdOfAnAddedUpSlurmJobIsOneTheApiTakesBack(@TempDir Path state) throws Exception {
        long t = Instant.parse("2026-04-01T07:00:00Z").toEpochMilli();
        long t2 = t + 65_000; // step 1, 5 s after step 0 ended: a second track of job 777
        Path dir = Files.createDirectories(state.resolve("accounting"));
        Files.writeString(dir.resolve("2026-04-01.log"), line(interval("slurm-job:777@" + t, t, t + 60_000, 1))
                + line(interval("slurm-job:777@" + t2, t2, t2 + 60_000, 1)));
        ManualClock clock = new ManualClock(Instant.parse("2026-04-01T08:00:00Z"));
        SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpResponse<String> job = get(c, "/api/v1/usage?allocation=777");
            assertThat(job.statusCode()).as("precondition: job 777's two tracks added up; answered %s", job.body())
                    .isEqualTo(200);
            Matcher m = Pattern.compile("\"id\"\\s*:\\s*\"([^\"]+)\"").matcher(job.body());
            assertThat(m.find()).as("precondition: the answer has an id: %s", job.body()).isTrue();
            String shown = m.group(1);
            HttpResponse<String> again = get(c, "/api/v1/usage?allocation=" + URLEncoder.encode(shown,
                    StandardCharsets.UTF_8));
            assertThat(again.statusCode()).as("GET ?allocation=777 answered the job with \"id\": \"%s\"; GET"
                    + " ?allocation=%s must show that same usage (200), not say nothing is recorded for it; answered"
                    + " %s", shown, shown, again.body()).isEqualTo(200);
        }
    }
}
