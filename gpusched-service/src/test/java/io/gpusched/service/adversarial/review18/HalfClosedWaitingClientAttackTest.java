package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review18: a client that half-closes its connection once its request is sent ({@code shutdown(SHUT_WR)}: what
 * {@code nc -N}, {@code socat} and many scripts do) and then reads its answer is still there: it reads every byte the
 * service sends. Its attached job waits for GPUs ({@code "wait"}). {@code ClientWatch.of} takes an end of stream on
 * the read side ({@code isInputShutdown}, {@code fill < 0}) for "the client has gone", so the queue drops the job, and
 * {@code ServiceRoutes.start} answered the client that still reads with 503 SHUTTING_DOWN ("the node service is
 * stopping"), although the service runs on. Neither a Unix nor a TCP socket tells a half-close from a close without
 * writing to the client, so the service keeps taking a half-close for a client that went (as nginx does), and now says
 * so: {@code 400 CLIENT_GONE}, naming the half-close (docs/SERVICE.md, the fair queue).
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class HalfClosedWaitingClientAttackTest {

    private static final String CLIENT = "import socket, sys\n"
            + "s = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nbody = open(sys.argv[2], 'rb').read()\n"
            + "s.sendall(b'POST /api/v1/jobs HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Type: application/json\\r\\n'"
            + " + b'Content-Length: %d\\r\\nConnection: close\\r\\n\\r\\n' % len(body) + body)\n"
            + "s.shutdown(socket.SHUT_WR)\nout = b''\nwhile True:\n    b = s.recv(65536)\n    if not b:\n        break\n"
            + "    out += b\nsys.stdout.buffer.write(out)\n";

    @Test
    void aWaitingJobWhoseClientHalfClosedIsToldItsClientWentNotThatTheServiceStops(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Answer full = bed.post(null, "/api/v1/allocations", "{\"flags\":[\"--gpu=8\"]}");
            assertThat(full.status()).as(full.body()).isEqualTo(201);
            String held = Clients.JSON.readTree(full.body()).path("id").asText();

            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/echo", "ran"),
                    "--gpu=1");
            m.put("wait", "2m");
            Path f = tmp.resolve("job.json");
            Files.writeString(f, Clients.JSON.writeValueAsString(m));
            Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
            Process client = new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                    "--init-groups", "--", "/usr/bin/python3", "-c", CLIENT, bed.socket.toString(), f.toString())
                    .redirectErrorStream(true).start();
            try {
                // alice's job is registered (it may be dropped by the time it is seen)
                assertThat(Clients.await(() -> !bed.service.jobViews(ServiceBed.root()).isEmpty(), 60)).as(
                        "alice's job was submitted").isTrue();
                String id = (String) bed.service.jobViews(ServiceBed.root()).get(0).get("id");
                // the queue looks at its waiting clients every tick (200 ms): a few ticks go by, then GPUs come free
                Clients.await(() -> !"QUEUED".equals(Clients.job(bed.service, id).get("state")), 2);
                Map<String, Object> before = Clients.job(bed.service, id);
                Answer release = bed.curl(null, "-X", "DELETE", "http://localhost/api/v1/allocations/" + held);
                assertThat(release.status()).as(release.body()).isEqualTo(200);
                String answer = Held.output(client, 60);
                assertThat(answer).as("what alice's client (half-closed, reading) was told; her job before the"
                        + " release: %s, at the end: %s", before, Clients.job(bed.service, id))
                        .doesNotContain("SHUTTING_DOWN").contains("HTTP/1.1 400").contains("\"CLIENT_GONE\"")
                        .contains("half-close");
                Answer after = bed.post(null, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}");
                assertThat(after.status()).as("the service runs on and serves: %s", after.body()).isEqualTo(201);
            } finally {
                client.destroyForcibly();
            }
        }
    }
}
