package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile requests on the node socket (issue 33): malformed and oversized requests each get the console's JSON error
 * with a 4xx status, or are harmless; clients that send a request and vanish leave nothing behind; the server keeps
 * answering. Raw bytes, from this JVM (root) and from a real user's JVM ({@link HostileClient}).
 */
@Tag("adversarial")
@Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
class NodeSocketAttackTest {
    @TempDir
    Path tmp;
    Path socket;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer console;

    @BeforeEach
    void setUp() throws IOException {
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        socket = tmp.resolve("run").resolve("gpusched.sock");
        inventory = GpuInventories.simulated("dgx1-v100");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        console = ConsoleServer.builder().scheduler(scheduler).stateDir(Files.createDirectory(tmp.resolve("state")))
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket)
                .build().start();
    }

    @AfterEach
    void tearDown() {
        if (console != null) {
            console.close();
        }
        if (scheduler != null) {
            scheduler.close();
        }
        if (inventory != null) {
            inventory.close();
        }
    }

    /** @return everything the server answers to {@code request} on the socket, until it closes (or 30 s) */
    String exchange(byte[] request) throws IOException {
        try (SocketChannel ch = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            ch.connect(UnixDomainSocketAddress.of(socket));
            ch.write(ByteBuffer.wrap(request));
            ch.shutdownOutput();
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteBuffer b = ByteBuffer.allocate(8192);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            ch.configureBlocking(false);
            while (System.nanoTime() < deadline) {
                b.clear();
                int n;
                try {
                    n = ch.read(b);
                } catch (IOException reset) {
                    break;
                }
                if (n < 0) {
                    break;
                }
                if (n == 0) {
                    sleep(10);
                    continue;
                }
                out.write(b.array(), 0, n);
            }
            return out.toString(StandardCharsets.UTF_8);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    String exchange(String request) throws IOException {
        return exchange(request.getBytes(StandardCharsets.ISO_8859_1));
    }

    static void jsonError(String answer, int status, String what) {
        assertThat(answer).as(what).startsWith("HTTP/1.1 " + status).contains("application/json")
                .contains("\"status\":" + status).doesNotContain("<html").doesNotContain("Jetty(")
                .doesNotContain("at org.eclipse");
    }

    /** A 4xx in the console's JSON, whichever (Jetty's URI rules or the route table may answer first). */
    static void jsonClientError(String answer, String what) {
        assertThat(answer).as(what).startsWith("HTTP/1.1 4").contains("application/json").doesNotContain("<html")
                .doesNotContain("at org.eclipse");
    }

    String served() throws IOException {
        return exchange("GET /api/v1/node HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    }

    @Test
    void malformedAndOversizedRequestsGetTheConsolesJsonErrors() throws Exception {
        jsonError(exchange("GARBAGE\r\n\r\n"), 400, "a request line that is not one");
        jsonError(exchange("GET /api/v1/node HTTP/9.9\r\nHost: localhost\r\n\r\n"), 505, "an HTTP version");
        jsonError(exchange("GET /api/v1/node HTTP/1.1\r\nHost: localhost\r\nX-Big: " + "a".repeat(16 * 1024)
                + "\r\n\r\n"), 431, "16 KiB of headers");
        jsonClientError(exchange("GET /api/v1/../../etc/passwd HTTP/1.1\r\nHost: localhost\r\n\r\n"),
                "dot segments");
        jsonClientError(exchange("GET /api/v1/node%00 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
                "a NUL in the path");
        jsonError(exchange("GET /api/v1/node HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 7"
                + "\r\n\r\nabcde"), 400, "two Content-Lengths");
        jsonError(exchange("GET /api/v1/node HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
                + "Content-Length: 5\r\n\r\n0\r\n\r\n"), 400, "smuggling: chunked and a length");
        // root is an admin: its POST reaches the allocations handler, whose own limit answers 413
        jsonError(exchange("POST /api/v1/allocations HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                + "Content-Length: 20000\r\n\r\n{\"flags\": [\"" + "x".repeat(19_980) + "\"]}"), 413, "20 KB body");
        jsonError(exchange("POST /api/v1/allocations HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                + "Content-Length: 10\r\n\r\n{\"fla"), 400, "a body shorter than declared");
        String notJson = exchange("POST /api/v1/allocations HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                + "Content-Length: 9\r\n\r\n{\"flags\":");
        jsonError(notJson, 400, "a body that is not JSON");
        assertThat(notJson).contains("not JSON");
        assertThat(scheduler.allocations()).isEmpty();
        assertThat(served()).startsWith("HTTP/1.1 200");
    }

    @Test
    void clientsThatSendAndVanishLeaveNothingBehind() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv to act as a real user");
        long before;
        try (var s = Files.list(Path.of("/proc/self/fd"))) {
            before = s.count();
        }
        try (LocalUsers users = LocalUsers.create()) {
            User mallory = users.user("mallory");
            Path classes = ClientLimitsAttackTest.copyHostileClient(tmp.resolve("hostile"));
            for (String mode : List.of("body", "half", "streams")) {
                String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
                Process p = new ProcessBuilder("setpriv", "--reuid=" + mallory.uid(), "--regid=" + mallory.gid(),
                        "--init-groups", "--", java, "-Xmx64m", "-XX:TieredStopAtLevel=1", "-cp", classes.toString(),
                        HostileClient.class.getName(), mode, "unix:" + socket, "30").start();
                String ready = new String(p.getInputStream().readNBytes(6), StandardCharsets.US_ASCII);
                assertThat(ready).as(mode).isEqualTo("READY ");
                p.destroyForcibly(); // vanishes with its requests in flight
                p.waitFor(60, TimeUnit.SECONDS);
                assertThat(served()).as("after %s clients vanished", mode).startsWith("HTTP/1.1 200");
            }
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        long now;
        do {
            sleep(100);
            try (var s = Files.list(Path.of("/proc/self/fd"))) {
                now = s.count();
            }
        } while (now > before + 4 && System.nanoTime() < deadline);
        assertThat(now).as("file descriptors after the vanished clients (before: %d)", before)
                .isLessThanOrEqualTo(before + 4);
        assertThat(served()).startsWith("HTTP/1.1 200");
    }
}
