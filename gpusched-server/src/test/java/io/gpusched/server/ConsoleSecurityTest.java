package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Collections;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The console's security rules, checked from outside over real sockets. */
class ConsoleSecurityTest {
    @TempDir
    Path state;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer server;
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    @BeforeEach
    void start() {
        inventory = GpuInventories.simulated("pcie-4xa10");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        server = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
    }

    @AfterEach
    void stop() {
        server.close();
        scheduler.close();
        inventory.close();
    }

    HttpResponse<String> send(String method, String path, String body, Optional<String> token) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(server.url() + path)).timeout(Duration.ofSeconds(10))
                .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(body));
        token.ifPresent(t -> b.header("Authorization", "Bearer " + t));
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void changesWithoutTheTokenAre401AndChangeNothing() throws Exception {
        HttpResponse<String> r = send("POST", "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}", Optional.empty());
        assertThat(r.statusCode()).isEqualTo(401);
        assertThat(r.headers().firstValue("WWW-Authenticate")).hasValue("Bearer realm=\"gpusched\"");
        HttpResponse<String> wrong = send("POST", "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}",
                Optional.of("0".repeat(64)));
        assertThat(wrong.statusCode()).isEqualTo(401);
        assertThat(scheduler.allocations()).isEmpty();
        String id = scheduler.allocate(io.gpusched.core.GpuRequests.fromCliFlags("--gpu=1")).id();
        assertThat(send("DELETE", "/api/v1/allocations/" + id, null, Optional.empty()).statusCode()).isEqualTo(401);
        assertThat(scheduler.allocation(id)).isPresent();
        String token = Files.readString(state.resolve(ApiToken.FILE_NAME)).strip();
        HttpResponse<String> ok = send("DELETE", "/api/v1/allocations/" + id, null, Optional.of(token));
        assertThat(ok.statusCode()).as(ok.body()).isEqualTo(200);
        assertThat(scheduler.allocation(id)).isEmpty();
        assertThat(send("GET", "/api/v1/devices", null, Optional.empty()).statusCode()).isEqualTo(200);
    }

    @Test
    void theTokenFileIsCreated0600AndOneReadableByOthersIsRefused() throws Exception {
        Path file = state.resolve(ApiToken.FILE_NAME);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file))).isEqualTo("rw-------");
        assertThat(Files.readString(file).strip()).matches("[0-9a-f]{64}");
        Path other = Files.createDirectories(state.resolve("other"));
        Path leaky = Files.writeString(other.resolve(ApiToken.FILE_NAME), "f".repeat(64));
        Files.setPosixFilePermissions(leaky, PosixFilePermissions.fromString("rw-r--r--"));
        assertThatThrownBy(() -> ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(other)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining(leaky.toString())
                .hasMessageContaining("rw-r--r--");
    }

    @Test
    void oversizeAndMalformedBodiesAre4xxWithTheParsersMessage() throws Exception {
        Optional<String> token = Optional.of(server.token().value());
        HttpResponse<String> big = send("POST", "/api/v1/allocations", "{\"flags\":[\"" + "x".repeat(20_000) + "\"]}",
                token);
        assertThat(big.statusCode()).isEqualTo(413);
        assertThat(send("POST", "/api/v1/allocations", "{not json", token).statusCode()).isEqualTo(400);
        assertThat(send("POST", "/api/v1/allocations", "[]", token).body()).contains("JSON object");
        HttpResponse<String> badFlag = send("POST", "/api/v1/allocations", "{\"flags\":[\"--gpu-memory=lots\"]}",
                token);
        assertThat(badFlag.statusCode()).isEqualTo(400);
        assertThat(badFlag.body()).contains("invalid memory size \\\"lots\\\"");
        HttpResponse<String> refused = send("POST", "/api/v1/allocations", "{\"flags\":[\"--gpu=9\"]}", token);
        assertThat(refused.statusCode()).isEqualTo(409);
        assertThat(refused.body()).containsPattern("\"reason\":\"(INSUFFICIENT_GPUS|NODE_TOO_SMALL)\"");
        HttpResponse<String> made = send("POST", "/api/v1/allocations", "{\"resources\":{\"gpu_count\":2}}", token);
        assertThat(made.statusCode()).as(made.body()).isEqualTo(201);
        assertThat(scheduler.allocations()).hasSize(1);
        assertThat(send("GET", "/api/v1/samples?gpu=zz", null, Optional.empty()).statusCode()).isEqualTo(400);
        // a body that claims more than it sends, over a raw socket: refused before it is read
        try (Socket s = new Socket(server.address().getAddress(), server.address().getPort())) {
            s.setSoTimeout(10_000);
            OutputStream out = s.getOutputStream();
            out.write(("POST /api/v1/allocations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token.get()
                    + "\r\nContent-Length: 99999999\r\n\r\n{").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            String status = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
            assertThat(status).isEqualTo("HTTP/1.1 413");
        }
    }

    @Test
    void itListensOnLoopbackOnlyUnlessAsked() throws Exception {
        assertThat(server.address().getAddress().isLoopbackAddress()).isTrue();
        assertThat(ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state).build())
                .satisfies(c -> c.close());
        // every non-loopback address of this host: nothing of ours answers there
        for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                if (a.isLoopbackAddress() || a.isLinkLocalAddress()) {
                    continue;
                }
                try (Socket s = new Socket()) {
                    s.connect(new InetSocketAddress(a, server.address().getPort()), 2000);
                    throw new AssertionError("the console answers on " + a);
                } catch (java.io.IOException expected) {
                    // refused: good
                }
            }
        }
        InetAddress anyAddress = InetAddress.getByName("0.0.0.0");
        assertThatThrownBy(() -> ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                .listen(new InetSocketAddress(anyAddress, 0)).build()).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a loopback address");
    }
}
