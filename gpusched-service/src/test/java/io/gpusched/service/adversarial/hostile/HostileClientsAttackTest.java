package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.net.SocketException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile clients of the service's routes on the node socket: malformed, mistyped and oversized bodies at every route
 * answer a typed 4xx naming what is wrong; hundreds of clients that queue a request and vanish are dropped; nothing is
 * left behind (waiting requests, live allocations, job cgroups, file descriptors, threads) and the service still
 * serves. The attacker is a plain socket, judged by what it reads back and by the ledger's file.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class HostileClientsAttackTest {
    static final ObjectMapper JSON = new ObjectMapper();

    private static String raw(Path socket, String request) throws IOException {
        try (SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            c.connect(UnixDomainSocketAddress.of(socket));
            c.write(ByteBuffer.wrap(request.getBytes(StandardCharsets.ISO_8859_1)));
            c.shutdownOutput();
            ByteBuffer b = ByteBuffer.allocate(1 << 16);
            StringBuilder out = new StringBuilder();
            try {
                while (c.read(b) > 0) {
                    b.flip();
                    out.append(StandardCharsets.UTF_8.decode(b));
                    b.clear();
                }
            } catch (SocketException reset) {
                // an answer sent before the whole request was read (413 for a body past the limit) is followed by a
                // reset instead of an end of stream: the server closed with the rest of the body unread. The answer
                // itself came whole, and is judged as any other; a reset before any answer is still an error
                if (out.isEmpty()) {
                    throw reset;
                }
            }
            return out.toString();
        }
    }

    private static String post(String path, String body) {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + b.length + "\r\nConnection: close\r\n\r\n" + body;
    }

    private static int status(String answer) {
        return Integer.parseInt(answer.substring(9, 12));
    }

    private static JsonNode body(String answer) throws IOException {
        return JSON.readTree(answer.substring(answer.indexOf("\r\n\r\n") + 4));
    }

    /**
     * @return the threads other than this test's that are inside the service's code now (handlers waiting for a
     *         queued request, relaying a job, ...); a Jetty pool thread back in its pool is not one
     */
    static long inService() {
        Thread me = Thread.currentThread();
        return Thread.getAllStackTraces().entrySet().stream().filter(e -> e.getKey() != me)
                .filter(e -> Arrays.stream(e.getValue()).anyMatch(f -> f.getClassName().startsWith(
                        "io.gpusched.service.")))
                .count();
    }

    /** @return what any of the clients has been answered so far (nothing, for a request that waits) */
    static List<String> early(List<SocketChannel> clients) throws IOException {
        List<String> out = new ArrayList<>();
        for (SocketChannel c : clients) {
            c.configureBlocking(false);
            ByteBuffer b = ByteBuffer.allocate(4096);
            if (c.read(b) > 0) {
                out.add(new String(b.array(), 0, b.position(), StandardCharsets.UTF_8));
            }
            c.configureBlocking(true);
        }
        return out;
    }

    static long fds() throws IOException {
        try (var s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count();
        }
    }

    @Test
    void badBodiesAreTypedErrorsAndVanishingClientsLeaveNothingBehind(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().service(ServiceSettings.defaults().withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Path sock = bed.socket;
            String[][] bad = {
                {"/api/v1/allocations", "{\"flags\":[\"--gpu=2\"]", "400"},
                {"/api/v1/allocations", "{\"flags\":\"--gpu=2\"}", "400"},
                {"/api/v1/allocations", "{\"flags\":[\"--gpu=2\"],\"flags\":[\"--gpu=8\"]}", "400"},
                {"/api/v1/allocations", "{\"flags\":[\"--gpu=1\"],\"wait\":\"forever\"}", "400"},
                {"/api/v1/allocations", "[".repeat(5000) + "]".repeat(5000), "400"},
                {"/api/v1/allocations", "{\"resources\":{\"gpu_count\":-3}}", "400"},
                {"/api/v1/jobs", "{\"argv\":[],\"cwd\":\"/\"}", "400"},
                {"/api/v1/jobs", "{\"argv\":[\"x\"],\"cwd\":\"relative\"}", "400"},
                {"/api/v1/jobs", "{\"argv\":[\"x\"],\"cwd\":\"/\",\"env\":{\"A=B\":\"c\"}}", "400"},
                {"/api/v1/jobs", "{\"argv\":[\"x\"],\"cwd\":\"/\",\"detach\":\"yes\"}", "400"},
                {"/api/v1/jobs", "{\"argv\":[\"x\"],\"cwd\":\"/\",\"uid\":0}", "400"},
                {"/api/v1/jobs/none/signal", "{\"signal\":\"STOP\"}", "404"},
                {"/api/v1/devices/0/drain", "{\"reason\":5}", "400"},
                {"/api/v1/allocations/x/renew", "{\"lease\":\"-1h\"}", "400"},
            };
            for (String[] b : bad) {
                String a = raw(sock, post(b[0], b[1]));
                assertThat(status(a)).as(b[0] + " " + b[1] + " -> " + a).isEqualTo(Integer.parseInt(b[2]));
                JsonNode e = body(a);
                assertThat(e.get("reason").asText()).as(a).isNotBlank();
                assertThat(e.get("error").asText()).as(a).isNotBlank();
            }
            String huge = "{\"argv\":[\"" + "x".repeat(2 << 20) + "\"],\"cwd\":\"/\"}";
            assertThat(status(raw(sock, post("/api/v1/jobs", huge)))).isEqualTo(413);
            assertThat(status(raw(sock, "PUT /api/v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
                    + "Connection: close\r\n\r\n"))).isEqualTo(405);

            assertThat(bed.curl(null, "-X", "POST", "--data", "{\"flags\":[\"--gpu=8\"]}",
                    "http://localhost/api/v1/allocations").status()).isEqualTo(201);
            long fdsBefore = fds();
            long inServiceBefore = inService();
            List<SocketChannel> vanishing = new ArrayList<>();
            // root's waits: held by the global bound of requests held open only (maxHeldRequests, 192 of the 256
            // workers by default: ServiceHeldRequestsAttackTest), so 180 are all queued
            for (int i = 0; i < 180; i++) {
                SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX);
                c.connect(UnixDomainSocketAddress.of(sock));
                String body = i % 2 == 0 ? "{\"flags\":[\"--gpu=1\"],\"wait\":\"10m\"}"
                        : "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/true\"],\"env\":{},\"cwd\":\"/\",\"wait\":\"10m\"}";
                c.write(ByteBuffer.wrap(post(i % 2 == 0 ? "/api/v1/allocations" : "/api/v1/jobs", body)
                        .getBytes(StandardCharsets.UTF_8)));
                vanishing.add(c);
            }
            for (int i = 0; i < 3000 && bed.service.queueView().size() < 180; i++) {
                Thread.sleep(20); // each job is checked first (its working directory, as its caller): slow on a busy host
            }
            assertThat(bed.service.queueView()).as("queued; answered early: %s", early(vanishing)).hasSize(180);
            for (SocketChannel c : vanishing) {
                c.close();
            }
            for (int i = 0; i < 3000 && !bed.service.queueView().isEmpty(); i++) {
                Thread.sleep(20);
            }
            assertThat(bed.service.queueView()).as("every vanished client's request was dropped; jobs: "
                    + bed.service.jobViews(ServiceBed.root()).stream().map(j -> j.get("state")).toList()).isEmpty();
            for (int i = 0; i < 3000 && (fds() > fdsBefore + 5 || inService() > inServiceBefore); i++) { // 60 s
                Thread.sleep(20);
            }
            assertThat(fds()).as("file descriptors").isLessThanOrEqualTo(fdsBefore + 5);
            // idle threads stay in Jetty's pool for its idle timeout; none may stay in the service's code
            assertThat(inService()).as("threads still inside the service for a vanished client")
                    .isLessThanOrEqualTo(inServiceBefore);
            assertThat(LedgerReader.read(bed.state).live).hasSize(1);
            try (var s = Files.list(bed.jobParent)) {
                assertThat(s.filter(Files::isDirectory)).as("job cgroups").isEmpty();
            } catch (NoSuchFileException none) {
                // no job ever started: no parent either
            }
            // and it still serves
            Answer who = bed.curl(alice, "http://localhost/api/v1/whoami");
            assertThat(who.status()).isEqualTo(200);
            assertThat(JSON.readTree(who.body()).get("uid").asLong()).isEqualTo(alice.uid());
        }
    }
}
