package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Many small writes on stdout and stderr interleaved (one {@code write} each, about 40 bytes of line per 6 bytes of
 * output, so the 256 KiB of queued lines is reached after a few thousand), with a client that does not read for a
 * while (the job waits on its pipes), then reads everything: each stream's data must be complete and in order, and
 * {@code exit} last with the job's code, once.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class SmallWritesOnBothStreamsAttackTest {
    private static final int N = 30_000;

    @Test
    void bothStreamsAreCompleteAndInOrderThenTheExitLine(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "i=0; while [ $i -lt " + N + " ]; do i=$((i+1)); echo $i; echo e$i >&2; done;"
                            + " exit 3")));
            try {
                Clients.awaitRunning(s, 60);
                Thread.sleep(5000); // not reading: the job's output waits
                byte[] raw = Clients.readAll(client, 90);
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                ByteArrayOutputStream err = new ByteArrayOutputStream();
                List<String> types = new java.util.ArrayList<>();
                JsonNode last = null;
                for (String l : new String(raw, StandardCharsets.UTF_8).split("\n")) {
                    if (l.isBlank()) {
                        continue;
                    }
                    JsonNode n = Clients.JSON.readTree(l);
                    String t = n.path("type").asText();
                    types.add(t);
                    last = n;
                    if (t.equals("stdout")) {
                        out.write(Base64.getDecoder().decode(n.path("data").asText()));
                    } else if (t.equals("stderr")) {
                        err.write(Base64.getDecoder().decode(n.path("data").asText()));
                    }
                }
                StringBuilder wantOut = new StringBuilder();
                StringBuilder wantErr = new StringBuilder();
                for (int i = 1; i <= N; i++) {
                    wantOut.append(i).append('\n');
                    wantErr.append('e').append(i).append('\n');
                }
                String summary = Clients.streamSummary(raw);
                assertThat(types).as("stream: %s", summary).isNotEmpty();
                assertThat(types.indexOf("exit")).as("one exit line, last (stream: %s)", summary).isEqualTo(types
                        .size() - 1);
                assertThat(last.path("code").asInt()).as("exit code").isEqualTo(3);
                assertThat(out.toString(StandardCharsets.US_ASCII)).as("stdout complete and in order").isEqualTo(
                        wantOut.toString());
                assertThat(err.toString(StandardCharsets.US_ASCII)).as("stderr complete and in order").isEqualTo(
                        wantErr.toString());
                assertThat(Clients.await(() -> Clients.held(bed).isEmpty(), 30)).as("GPU released, held %s",
                        Clients.held(bed)).isTrue();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
