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
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 65. docs/ACCOUNTING.md: "{@code gpusched report <namespace>/<pod>} or {@code gpusched report <job id>} shows
 * one" pod or Slurm job, and "the REST API the same data ({@code GET /api/v1/usage?allocation=ID})". The command
 * takes a pod's {@code <namespace>/<pod>} and a Slurm job's id (and a job's id since review53); the REST API answers
 * 404 "no usage is recorded" for the very pod and job the command shows from the same store: a console or API user
 * can list a pod's row ({@code ?by=pod}) but cannot open it, save by guessing its internal track id
 * ({@code pod:<namespace>/<pod>@<epoch ms>}).
 */
class Review65UsageOfAPodOrSlurmJobTest {
    private final HttpClient http = HttpClient.newHttpClient();

    private static String line(String json) {
        CRC32C c = new CRC32C();
        c.update(json.getBytes(StandardCharsets.UTF_8));
        return String.format("%08x %s%n", c.getValue(), json);
    }

    private static String interval(String id, String owner, String job, long from, long to, int gpu) {
        long held = to - from;
        return "{\"k\":\"i\",\"id\":\"" + id + "\",\"owner\":\"" + owner + "\",\"job\":\"" + job + "\",\"from\":"
                + from + ",\"to\":" + to + ",\"first\":true,\"end\":\"GONE\",\"gpus\":[{\"i\":" + gpu
                + ",\"uuid\":\"GPU-" + gpu + "\",\"held\":" + held + ",\"meas\":" + held + ",\"um\":" + held
                + ",\"us\":" + (50.0 * held) + ",\"up\":50.0,\"idle\":0,\"mp\":1073741824,\"e\":" + (held * 100)
                + ",\"ee\":0,\"em\":" + held + "}]}";
    }

    private HttpResponse<String> get(ConsoleServer c, String path) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(c.url() + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void theApiShowsOnePodOrSlurmJobAsTheCommandDoes(@TempDir Path state) throws Exception {
        long t = Instant.parse("2026-04-01T07:00:00Z").toEpochMilli();
        Path dir = Files.createDirectories(state.resolve("accounting"));
        Files.writeString(dir.resolve("2026-04-01.log"),
                line(interval("pod:ml/train-0@" + t, "ml", "ml/train-0", t, t + 60_000, 0))
                        + line(interval("slurm-job:777@" + t, "alice", "777", t, t + 60_000, 1)));
        ManualClock clock = new ManualClock(Instant.parse("2026-04-01T08:00:00Z"));
        SimulatedGpuInventory inv = NodeDescriptions.profile("pcie-4xa10", clock);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).clock(clock).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).stateDir(state).clock(clock).ticking(false)
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            HttpResponse<String> rows = get(c, "/api/v1/usage?by=pod&since=2h");
            assertThat(rows.body()).as("precondition: the pod has its row").contains("\"key\":\"ml/train-0\"");
            HttpResponse<String> pod = get(c, "/api/v1/usage?allocation=" + URLEncoder.encode("ml/train-0",
                    StandardCharsets.UTF_8));
            assertThat(pod.statusCode()).as("GET /api/v1/usage?allocation=ml/train-0: the pod `gpusched report"
                    + " ml/train-0` shows from this store; answered %s", pod.body()).isEqualTo(200);
            assertThat(pod.body()).contains("pod:ml/train-0@" + t);
            HttpResponse<String> job = get(c, "/api/v1/usage?allocation=777");
            assertThat(job.statusCode()).as("GET /api/v1/usage?allocation=777: the Slurm job `gpusched report 777`"
                    + " shows from this store; answered %s", job.body()).isEqualTo(200);
        }
    }
}
