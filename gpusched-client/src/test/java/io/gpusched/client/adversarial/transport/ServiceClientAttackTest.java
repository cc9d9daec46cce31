package io.gpusched.client.adversarial.transport;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.client.JobExit;
import io.gpusched.client.JobListener;
import io.gpusched.client.JobSpec;
import io.gpusched.client.JobView;
import io.gpusched.client.NodeServiceException;
import io.gpusched.client.NodeServiceException.Kind;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.AllocationView;
import io.gpusched.testing.UnixHttpStandIn;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.assertj.core.api.ThrowableAssert;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client against sockets and servers that are not a working node service: a path that is not a socket, no
 * socket, a dead socket, a server answering garbage, half an answer, an answer over the size limit, a server that never
 * answers or stalls, a server that dies in the middle of a job's stream. Each is one {@link NodeServiceException} of the
 * right kind whose message names the socket; nothing hangs (the test's own timeout would catch it) and no connection
 * is left open by the client.
 */
@Tag("adversarial")
@Timeout(60)
class ServiceClientAttackTest {
    @TempDir
    Path dir;
    UnixHttpStandIn service;

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
    }

    private ServiceClient serve(UnixHttpStandIn.Handler h) throws Exception {
        service = new UnixHttpStandIn(dir.resolve("s.sock"), h);
        return ServiceClient.builder().socket(service.socket()).answerTimeout(Duration.ofMillis(1500))
                .connectTimeout(Duration.ofSeconds(2)).maxAnswerBytes(64 * 1024).maxLineBytes(4096).build();
    }

    private static void fails(Kind kind, Path socket, ThrowableAssert.ThrowingCallable call, String... says) {
        assertThatThrownBy(call).isInstanceOfSatisfying(NodeServiceException.class, e -> {
            assertThat(e.kind()).as(e.getMessage()).isEqualTo(kind);
            assertThat(e.getMessage()).contains(socket.toString());
            for (String s : says) {
                assertThat(e.getMessage()).contains(s);
            }
        });
    }

    @Test
    void aPathThatIsNotASocketIsNamedForWhatItIs() throws Exception {
        Path file = Files.writeString(dir.resolve("file.sock"), "not a socket");
        fails(Kind.UNREACHABLE, file, () -> ServiceClient.connect(file).node(), "a regular file", "not a socket");
        Path directory = Files.createDirectory(dir.resolve("dir.sock"));
        fails(Kind.UNREACHABLE, directory, () -> ServiceClient.connect(directory).node(), "a directory");
        Path fifo = dir.resolve("fifo.sock");
        assertThat(new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor()).isZero();
        fails(Kind.UNREACHABLE, fifo, () -> ServiceClient.connect(fifo).node(), "a FIFO");
        Path missing = dir.resolve("missing.sock");
        fails(Kind.UNREACHABLE, missing, () -> ServiceClient.connect(missing).node(), "no such file");
        Path link = Files.createSymbolicLink(dir.resolve("link.sock"), file);
        fails(Kind.UNREACHABLE, link, () -> ServiceClient.connect(link).node(), "a regular file");
    }

    @Test
    void aSocketNobodyListensOnIsRefusedNamingIt() throws Exception {
        Path stale = dir.resolve("stale.sock");
        try (ServerSocketChannel s = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            s.bind(UnixDomainSocketAddress.of(stale));
        }
        assertThat(stale).exists(); // the file of a service that is gone
        fails(Kind.UNREACHABLE, stale, () -> ServiceClient.connect(stale).node(), "connection refused");
    }

    @Test
    void garbageIsNotTheServicesProtocol() throws Exception {
        ServiceClient c = serve((r, x) -> x.raw("SSH-2.0-OpenSSH_9.2\r\n"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "HTTP/1.x status line", "SSH-2.0");
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nnotjson"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "not JSON");
        c = serveAgain((r, x) -> x.json(200, "{\"hostname\":\"n\",\"backend\":7}"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "\"backend\"");
        c = serveAgain((r, x) -> x.json(200, "[" + "[".repeat(5000) + "]".repeat(5000) + "]"));
        fails(Kind.BAD_ANSWER, service.socket(), c::devices);
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "two different Content-Length");
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "chunk size");
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\n"));
        fails(Kind.BAD_ANSWER, service.socket(), c::node, "malformed header");
        c = serveAgain((r, x) -> x.json(201, "{\"id\":\"a\",\"devices\":[0,1],\"uuids\":[\"GPU-0\"],\"sharing\":"
                + "\"EXCLUSIVE\",\"createdAt\":\"t\",\"labels\":{}}"));
        fails(Kind.BAD_ANSWER, service.socket(), () -> c2().allocate(List.of("--gpu=2")), "does not hold together");
    }

    private ServiceClient current;

    private ServiceClient c2() {
        return current;
    }

    private ServiceClient serveAgain(UnixHttpStandIn.Handler h) throws Exception {
        service.close();
        current = serve(h);
        return current;
    }

    @Test
    void halfAnAnswerIsAConnectionLostNotAHang() throws Exception {
        ServiceClient c = serve((r, x) -> x.raw("HTTP/1.1 200 OK\r\nContent-Type: app").close());
        fails(Kind.CONNECTION_LOST, service.socket(), c::node, "in the middle of its headers");
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"hostname\":").close());
        fails(Kind.CONNECTION_LOST, service.socket(), c::node, "before its Content-Length");
        c = serveAgain((r, x) -> x.chunkedHead(200, "application/json").raw("40\r\n{\"host").close());
        fails(Kind.CONNECTION_LOST, service.socket(), c::node, "in the middle of a chunk");
        c = serveAgain((r, x) -> x.close());
        fails(Kind.CONNECTION_LOST, service.socket(), c::node, "without answering");
    }

    @Test
    void anAnswerOverTheLimitIsRefusedWithoutReadingItAll() throws Exception {
        ServiceClient c = serve((r, x) -> x.raw("HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n"));
        fails(Kind.ANSWER_TOO_LARGE, service.socket(), c::node, "999999999999 bytes", "65536");
        c = serveAgain((r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n");
            byte[] mb = new byte[1 << 20];
            for (int i = 0; i < 64 && x.open(); i++) {
                x.raw(mb); // an endless answer: the client stops at its limit and closes
            }
        });
        fails(Kind.ANSWER_TOO_LARGE, service.socket(), c::node, "65536");
        c = serveAgain((r, x) -> x.raw("HTTP/1.1 200 OK\r\nX: " + "a".repeat(70_000) + "\r\n\r\n"));
        fails(Kind.ANSWER_TOO_LARGE, service.socket(), c::node, "headers");
        c = serveAgain((r, x) -> {
            StringBuilder h = new StringBuilder("HTTP/1.1 200 OK\r\n");
            for (int i = 0; i < 200; i++) {
                h.append("X-").append(i).append(": 1\r\n");
            }
            x.raw(h.append("\r\n").toString());
        });
        fails(Kind.ANSWER_TOO_LARGE, service.socket(), c::node, "100 headers");
    }

    @Test
    void aServerThatNeverAnswersTimesOutNamingTheSocket() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        ServiceClient c = serve((r, x) -> release.await(30, TimeUnit.SECONDS));
        fails(Kind.TIMEOUT, service.socket(), c::node, "did not finish its answer");
        // a server that sends its head and then stalls mid-body is timed out the same way
        c = serveAgain((r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"ho");
            release.await(30, TimeUnit.SECONDS);
        });
        fails(Kind.TIMEOUT, service.socket(), c::node);
        release.countDown(); // both ended by the client's limit (TIMEOUT), not by the server letting go
    }

    @Test
    void aServiceThatDiesWhileAJobRunsIsAConnectionLostNamingTheJob() throws Exception {
        String job = "{\"id\":\"j-7\",\"owner\":\"alice\",\"state\":\"RUNNING\",\"devices\":[0]}";
        String alloc = "{\"id\":\"a-1\",\"devices\":[0],\"uuids\":[\"GPU-0\"],\"sharing\":\"EXCLUSIVE\","
                + "\"createdAt\":\"t\",\"labels\":{}}";
        ServiceClient c = serve((r, x) -> x.chunkedHead(200, "application/x-ndjson")
                .chunk("{\"type\":\"started\",\"job\":" + job + ",\"allocation\":" + alloc + "}\n")
                .chunk("{\"type\":\"stdout\",\"data\":\"aGk=\"}\n").close());
        AtomicReference<String> started = new AtomicReference<>();
        JobSpec spec = new JobSpec(List.of("--gpu=1"), Optional.empty(), List.of("sleep", "1"), Map.of(), "/",
                Optional.empty());
        fails(Kind.CONNECTION_LOST, service.socket(), () -> c.run(spec, new JobListener() {
            @Override
            public void started(JobView j, AllocationView a) {
                started.set(j.id());
            }
        }), "before job j-7 ended");
        assertThat(started.get()).isEqualTo("j-7");
        // an error after the stream began is the error's own type
        ServiceClient d = serveAgain((r, x) -> x.chunkedHead(200, "application/x-ndjson")
                .chunk("{\"type\":\"error\",\"status\":409,\"error\":\"no GPU free after 10m\",\"reason\":"
                        + "\"INSUFFICIENT_GPUS\"}\n")
                .lastChunk());
        assertThatThrownBy(() -> d.run(spec, new JobListener() {}))
                .hasMessageContaining("no GPU free after 10m");
    }

    @Test
    void aSilentJobIsNotTimedOutAndCloseFromAnotherThreadEndsTheStream() throws Exception {
        ServiceClient c = serve((r, x) -> {
            x.chunkedHead(200, "application/x-ndjson");
            Thread.sleep(3000); // longer than the answer timeout: a job may print nothing for hours
            x.chunk("{\"type\":\"exit\",\"code\":3,\"signal\":null}\n").lastChunk();
        });
        JobSpec spec = new JobSpec(List.of(), Optional.empty(), List.of("true"), Map.of(), "/", Optional.empty());
        assertThat(c.run(spec, new JobListener() {})).isEqualTo(new JobExit(3, Optional.empty()));

        ServiceClient d = serveAgain((r, x) -> {
            x.chunkedHead(200, "application/x-ndjson");
            Thread.sleep(30_000);
        });
        Thread closer = new Thread(() -> {
            try {
                Thread.sleep(500);
            } catch (InterruptedException e) {
                return;
            }
            d.close();
        });
        closer.start();
        fails(Kind.CONNECTION_LOST, service.socket(), () -> d.run(spec, new JobListener() {}));
        closer.join();
        assertThatThrownBy(d::node).isInstanceOf(NodeServiceException.class).hasMessageContaining("closed");
    }

    @Test
    void anInterruptedWaitThrowsInterruptedException() throws Exception {
        ServiceClient c = serve((r, x) -> Thread.sleep(30_000));
        Thread me = Thread.currentThread();
        Thread interrupter = new Thread(() -> {
            try {
                Thread.sleep(500);
            } catch (InterruptedException e) {
                return;
            }
            me.interrupt();
        });
        interrupter.start();
        assertThatThrownBy(() -> c.allocate(List.of("--gpu=1"), Duration.ofMinutes(5)))
                .isInstanceOf(InterruptedException.class);
        interrupter.join();
        Thread.interrupted();
    }

    @Test
    void aFullBacklogTimesOutTheConnect() throws Exception {
        Path sock = dir.resolve("full.sock");
        try (ServerSocketChannel s = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            s.bind(UnixDomainSocketAddress.of(sock), 1); // never accepts: the backlog fills
            ServiceClient c = ServiceClient.builder().socket(sock).connectTimeout(Duration.ofMillis(500))
                    .answerTimeout(Duration.ofMillis(500)).build();
            // the first connections fill the backlog and then wait for an answer that never comes
            for (int i = 0; i < 4; i++) {
                try {
                    c.node();
                } catch (NodeServiceException e) {
                    assertThat(e.kind()).isEqualTo(Kind.TIMEOUT);
                    assertThat(e.getMessage()).contains(sock.toString());
                }
            }
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static String device(int index) {
        return "{\"index\":" + index + ",\"uuid\":\"GPU-" + index + "\",\"name\":\"sim\",\"vendor\":\"NVIDIA\","
                + "\"health\":\"HEALTHY\",\"pool\":\"IN_POOL\"}";
    }

    private static String allocation(String id, int device, String padding) {
        return "{\"id\":\"" + id + "\",\"owner\":\"mallory\",\"devices\":[" + device + "],\"uuids\":[\"GPU-" + device
                + "\"],\"sharing\":\"SHARED\",\"createdAt\":\"2026-11-29T10:00:00Z\",\"labels\":{\"pad\":\""
                + padding + "\"}}";
    }

    private static final String TWO_GPUS = "{\"devices\":[" + device(0) + "," + device(1) + "],\"allocations\":[]}";

    /** A service whose event stream is a state of two GPUs (unless {@code state} is null) and then {@code events}. */
    private ServiceClient stream(String state, String... events) throws Exception {
        UnixHttpStandIn.Handler h = (r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
            if (state != null) {
                x.raw("event: state\ndata: " + state + "\n\n");
            }
            for (String e : events) {
                x.raw(e + "\n\n");
            }
            Thread.sleep(30_000);
        };
        return service == null ? serve(h) : serveAgain(h);
    }

    private static void watch(ServiceClient c) throws InterruptedException {
        c.watch(Duration.ofSeconds(1), frame -> true);
    }

    @Test
    void aHostileEventStreamIsATypedErrorNotACrashOrAGrowingMap() throws Exception {
        ServiceClient c = stream(TWO_GPUS, "event: delta\ndata: {\"devices\":[" + device(99) + "],\"allocations\":"
                + "{\"upsert\":[],\"remove\":[]}}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(c), "a delta event for GPU 99", "did not list");
        ServiceClient onUnknown = stream(TWO_GPUS, "event: delta\ndata: {\"devices\":[],\"allocations\":"
                + "{\"upsert\":[" + allocation("a-1", 42, "") + "],\"remove\":[]}}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(onUnknown), "a-1", "GPU 42");
        ServiceClient notAnObject = stream(TWO_GPUS, "event: delta\ndata: {\"devices\":[],\"allocations\":[]}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(notAnObject), "\"allocations\" of a delta event");
        ServiceClient numbers = stream(TWO_GPUS, "event: delta\ndata: {\"devices\":[],\"allocations\":"
                + "{\"upsert\":[],\"remove\":[1,2]}}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(numbers), "\"remove\"");
        ServiceClient notJson = stream(TWO_GPUS, "event: delta\ndata: {\"devices\":");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(notJson));
        ServiceClient early = stream(null, "event: delta\ndata: {\"devices\":[],\"allocations\":"
                + "{\"upsert\":[],\"remove\":[]}}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(early), "before the state event");
        ServiceClient twice = stream("{\"devices\":[" + device(0) + "," + device(0) + "],\"allocations\":[]}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(twice), "GPU 0 twice");
        ServiceClient elsewhere = stream("{\"devices\":[" + device(0) + "],\"allocations\":[],\"truncated\":"
                + "{\"rest\":\"http://elsewhere.example/api/v1/allocations?after=x\"}}");
        fails(Kind.BAD_ANSWER, service.socket(), () -> watch(elsewhere), "not a page of /api/v1/allocations");
    }

    @Test
    void anEndlessStreamOfNewAllocationsEndsTheWatchAtTheAnswerLimit() throws Exception {
        // each delta is small (well within the 64 KiB answer limit), but every one brings an allocation never removed:
        // 2,000 of them (2.2 MB), then the stream ends (a client that kept them all would see the end, not the limit)
        String pad = "x".repeat(1000);
        ServiceClient c = serve((r, x) -> {
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
            x.raw("event: state\ndata: " + TWO_GPUS + "\n\n");
            for (int i = 0; i < 2000; i++) {
                x.raw("event: delta\ndata: {\"devices\":[],\"allocations\":{\"upsert\":[" + allocation("a-" + i, i % 2,
                        pad) + "],\"remove\":[]}}\n\n");
            }
        });
        int[] frames = {0};
        fails(Kind.ANSWER_TOO_LARGE, service.socket(), () -> c.watch(Duration.ofSeconds(1), f -> {
            frames[0]++;
            return true;
        }), "streamed more allocations than the client's limit of 65536 bytes");
        assertThat(frames[0]).as("frames before the limit (one a delta)").isBetween(50, 70);
    }
}
