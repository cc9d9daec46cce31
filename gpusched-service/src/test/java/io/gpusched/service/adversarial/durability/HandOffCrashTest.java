package io.gpusched.service.adversarial.durability;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.testing.LedgerReader;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Releases handed to the fair queue (made in one transaction with the grants they allow) under load, then the service
 * JVM killed with SIGKILL mid-stream. Twenty-four clients, three times the node's GPUs, each allocate one GPU with a
 * wait and release it, over the service's Unix socket; what the service acknowledged is checked against the ledger
 * file, read by the independent {@link LedgerReader} after the kill: every acknowledged grant and release is there,
 * no acknowledged release is live, no GPU was granted twice while held (neither in the file's history nor in the
 * answers: a client holds its GPU from the grant's answer until it sends the release).
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class HandOffCrashTest {
    private static final int CLIENTS = 24;
    private static final int RELEASES_BEFORE_KILL = 300;
    private static final Pattern ID = Pattern.compile("\"id\":\"([^\"]+)\"");
    private static final Pattern DEVICES = Pattern.compile("\"devices\":\\[([^\\]]*)\\]");

    /** A grant as its client saw it: from the answer to the release's sending, on a clock shared by the clients. */
    private record Held(String id, List<Integer> devices, long from, long to) {
    }

    @Test
    void acknowledgedGrantsAndReleasesSurviveAKilledServiceAndNoGpuIsHeldTwice(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("state");
        Path socket = dir.resolve("s.sock");
        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), HandOffServiceChild.class.getName(), state.toString(),
                socket.toString()).redirectErrorStream(true).redirectOutput(dir.resolve("child.out").toFile())
                .start();
        Set<String> grantsAcked = Collections.synchronizedSet(new HashSet<>());
        Set<String> releasesAcked = Collections.synchronizedSet(new HashSet<>());
        List<Held> held = Collections.synchronizedList(new ArrayList<>());
        AtomicLong clock = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
        ExecutorService ex = Executors.newFixedThreadPool(CLIENTS);
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!Files.readString(dir.resolve("child.out")).contains("READY")) {
                assertThat(child.isAlive()).as("child: %s", Files.readString(dir.resolve("child.out"))).isTrue();
                assertThat(System.nanoTime()).as("the service starts within 60 s").isLessThan(deadline);
                Thread.sleep(20);
            }
            for (int i = 0; i < CLIENTS; i++) {
                ex.submit(() -> {
                    try (Client c = new Client(socket)) {
                        while (!stop.get()) {
                            String a = c.call("POST", "/api/v1/allocations",
                                    "{\"flags\":[\"--gpu=1\"],\"wait\":\"1m\"}", 201);
                            long from = clock.incrementAndGet();
                            Matcher m = ID.matcher(a);
                            Matcher d = DEVICES.matcher(a);
                            if (!m.find() || !d.find()) {
                                throw new IllegalStateException("no id or devices in " + a);
                            }
                            String id = m.group(1);
                            grantsAcked.add(id);
                            List<Integer> devices = new ArrayList<>();
                            for (String x : d.group(1).split(",")) {
                                devices.add(Integer.parseInt(x.strip()));
                            }
                            held.add(new Held(id, devices, from, clock.incrementAndGet()));
                            c.call("DELETE", "/api/v1/allocations/" + id, null, 200);
                            releasesAcked.add(id);
                        }
                    } catch (IOException e) {
                        // the service was killed: what this client had acknowledged is recorded
                    } catch (RuntimeException e) {
                        failures.add(e);
                    }
                    return null;
                });
            }
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (releasesAcked.size() < RELEASES_BEFORE_KILL) {
                assertThat(child.isAlive()).as("child: %s", Files.readString(dir.resolve("child.out"))).isTrue();
                assertThat(System.nanoTime()).as("%d releases within 2 min", RELEASES_BEFORE_KILL).isLessThan(
                        deadline);
                Thread.sleep(10);
            }
        } finally {
            child.destroyForcibly(); // SIGKILL, mid-stream: clients are allocating and releasing
            child.waitFor(30, TimeUnit.SECONDS);
            stop.set(true);
            ex.shutdown();
            ex.awaitTermination(60, TimeUnit.SECONDS);
        }
        assertThat(failures).as("answers other than the ones expected").isEmpty();
        Set<String> grants;
        Set<String> releases;
        synchronized (grantsAcked) {
            grants = new HashSet<>(grantsAcked);
        }
        synchronized (releasesAcked) {
            releases = new HashSet<>(releasesAcked);
        }
        LedgerReader file = LedgerReader.read(state);
        Set<String> ended = new HashSet<>();
        for (LedgerReader.Ended e : file.ended) {
            ended.add(e.id());
            if (releases.contains(e.id())) {
                assertThat(e.cause()).as("how acknowledged release %s ended", e.id()).isEqualTo("RELEASED");
            }
        }
        assertThat(releases).hasSizeGreaterThanOrEqualTo(RELEASES_BEFORE_KILL);
        assertThat(file.doubleGrants).as("GPUs granted twice while held, in the file's history").isEmpty();
        for (String id : releases) {
            assertThat(ended).as("acknowledged release %s is in the file", id).contains(id);
            assertThat(file.live).as("acknowledged release %s is not live", id).doesNotContainKey(id);
        }
        for (String id : grants) {
            assertThat(file.live.containsKey(id) || ended.contains(id)).as("acknowledged grant %s is in the file", id)
                    .isTrue();
        }
        List<Held> all;
        synchronized (held) {
            all = new ArrayList<>(held);
        }
        for (int i = 0; i < all.size(); i++) {
            for (int j = i + 1; j < all.size(); j++) {
                Held x = all.get(i);
                Held y = all.get(j);
                boolean overlap = x.from() < y.to() && y.from() < x.to();
                if (overlap) {
                    assertThat(x.devices()).as("%s and %s were held at once (answers)", x, y)
                            .doesNotContainAnyElementsOf(y.devices());
                }
            }
        }
    }

    /** One keep-alive HTTP/1.1 connection over the socket (Content-Length answers only). */
    private static final class Client implements AutoCloseable {
        private final SocketChannel ch;
        private final ByteBuffer in = ByteBuffer.allocate(1 << 16);

        Client(Path socket) throws IOException {
            ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            ch.connect(UnixDomainSocketAddress.of(socket));
        }

        String call(String method, String path, String body, int expect) throws IOException {
            byte[] b = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            String head = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + b.length
                    + "\r\n\r\n";
            ByteBuffer out = ByteBuffer.allocate(head.length() + b.length);
            out.put(head.getBytes(StandardCharsets.ISO_8859_1)).put(b).flip();
            while (out.hasRemaining()) {
                ch.write(out);
            }
            in.clear();
            while (true) {
                if (ch.read(in) < 0) {
                    throw new IOException("connection closed");
                }
                String s = new String(in.array(), 0, in.position(), StandardCharsets.ISO_8859_1);
                int end = s.indexOf("\r\n\r\n");
                if (end < 0) {
                    continue;
                }
                int cl = s.toLowerCase(Locale.ROOT).indexOf("content-length:");
                int len = cl < 0 ? 0 : Integer.parseInt(s.substring(cl + 15, s.indexOf("\r\n", cl)).strip());
                if (in.position() >= end + 4 + len) {
                    int status = Integer.parseInt(s.substring(9, 12));
                    if (status != expect) {
                        throw new IllegalStateException(method + " " + path + ": " + s);
                    }
                    return s.substring(end + 4, end + 4 + len);
                }
            }
        }

        @Override
        public void close() throws IOException {
            ch.close();
        }
    }
}
