package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Event-stream clients that never read: 64 raw loopback sockets with tiny receive buffers subscribe to
 * /api/v1/events and never read a byte while the node keeps producing events (allocations and releases). One good
 * client reads its stream on its own socket. Checked from outside: the good client keeps receiving every event (it
 * would stall behind the stuck ones if writers were shared and blocked), REST answers, the publisher (the allocating
 * thread) never blocks, each slow client is dropped and counted in /metrics, the per-client queue stays under its
 * bound, the server closes the dropped connections by itself (their slots come back though they never read), and
 * once a slow client finally reads it finds a closed stream holding nothing published after its drop.
 */
@Tag("adversarial")
class SlowEventClientsAttackTest {
    static final int SLOW = 64;

    @TempDir
    Path state;

    /** Reads one event stream into memory; counts down latches when marker texts appear. */
    static final class Reader implements Runnable {
        final Socket socket;
        final StringBuffer text = new StringBuffer();
        final AtomicLong bytes = new AtomicLong();
        final AtomicReference<String> waitingFor = new AtomicReference<>();
        volatile CountDownLatch seen = new CountDownLatch(0);

        Reader(Socket socket) {
            this.socket = socket;
        }

        /** arms a latch that opens when {@code marker} has been received */
        CountDownLatch expect(String marker) {
            CountDownLatch l = new CountDownLatch(1);
            synchronized (this) {
                waitingFor.set(marker);
                seen = l;
                if (text.indexOf(marker) >= 0) {
                    l.countDown();
                }
            }
            return l;
        }

        @Override
        public void run() {
            byte[] buf = new byte[65536];
            try (InputStream in = socket.getInputStream()) {
                int r;
                while ((r = in.read(buf)) > 0) {
                    bytes.addAndGet(r);
                    synchronized (this) {
                        int from = Math.max(0, text.length() - 256); // markers are short: search the new text only
                        text.append(new String(buf, 0, r, StandardCharsets.UTF_8));
                        String m = waitingFor.get();
                        if (m != null && text.indexOf(m, from) >= 0) {
                            seen.countDown();
                        }
                        if (text.length() > 1_000_000) { // keep a tail only
                            text.delete(0, text.length() - 256 * 1024); // more than a round produces
                        }
                    }
                }
            } catch (IOException closed) {
                // the test closes the socket at the end
            }
        }
    }

    static Socket subscribe(ConsoleServer c, int receiveBuffer) throws IOException {
        Socket s = new Socket();
        if (receiveBuffer > 0) {
            s.setReceiveBufferSize(receiveBuffer); // before connect, so the window offered is small
        }
        s.connect(c.address());
        s.getOutputStream().write(("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream"
                + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1));
        s.getOutputStream().flush();
        return s;
    }

    static String get(ConsoleServer c, String path) throws IOException {
        try (Socket s = new Socket(c.address().getAddress(), c.address().getPort())) {
            s.setSoTimeout(30_000);
            s.getOutputStream().write(("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    .getBytes(StandardCharsets.ISO_8859_1));
            return new String(s.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /**
     * Call with nothing being published (no ticking, no other publisher): the queue then only shrinks.
     *
     * @return whether something stays queued for {@code millis}: the writer is blocked in a write; false as soon as
     *     the queue is empty (the writer caught up: publish more), so a round whose writes went through costs no
     *     fixed wait
     */
    static boolean stillQueuedAfter(SseHub hub, long millis) throws InterruptedException {
        long end = System.nanoTime() + millis * 1_000_000;
        while (hub.queuedBytes() > 0) {
            if (System.nanoTime() - end >= 0) {
                return true;
            }
            Thread.sleep(2);
        }
        return false;
    }

    /** @return what a dropped client's stream held, up to its end (the server closed it) */
    static byte[] readToEnd(Socket s) throws IOException {
        s.setSoTimeout(30_000);
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        byte[] buf = new byte[65536];
        try (InputStream in = s.getInputStream()) {
            int r;
            while ((r = in.read(buf)) > 0) {
                got.write(buf, 0, r);
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("a dropped client's stream was not closed", e);
        } catch (IOException reset) {
            // closed with a reset rather than a FIN: closed all the same
        }
        return got.toByteArray();
    }

    static double metric(String scrape, String name) {
        Matcher m = Pattern.compile("(?m)^" + Pattern.quote(name) + "(?:\\{[^}]*})? (\\S+)$").matcher(scrape);
        assertThat(m.find()).as(name + " in /metrics").isTrue();
        return Double.parseDouble(m.group(1));
    }

    @Test
    @org.junit.jupiter.api.Timeout(value = 10, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void clientsThatNeverReadAreDroppedAndCountedWhileOthersStayServed() throws Exception {
        SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        List<Socket> slow = new ArrayList<>();
        Socket goodSocket = null;
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                     .stateDir(state).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build()
                     .start()) {
            goodSocket = subscribe(console, 0);
            Reader good = new Reader(goodSocket);
            Thread t = new Thread(good, "good-sse-client");
            t.setDaemon(true);
            t.start();
            assertThat(good.expect("event: state").await(60, TimeUnit.SECONDS)).as("the good client's first event")
                    .isTrue();
            for (int i = 0; i < SLOW; i++) {
                slow.add(subscribe(console, 1024));
            }
            // all subscribed (their first event is queued or written): the hub counts them
            while (console.eventHub().connections() < SLOW + 1) {
                Thread.sleep(10);
            }

            // the node keeps producing events; the good client must see each round's event before the next round,
            // so it is never the one that falls behind
            int rounds = 0;
            while (console.eventHub().dropped() < SLOW) {
                assertThat(rounds).as("slow clients dropped after %d rounds: %d of %d", rounds,
                        console.eventHub().dropped(), SLOW).isLessThan(5000);
                for (int k = 0; k < 5; k++) {
                    Allocation a = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=4", "--owner=round-" + rounds
                            + "-" + k));
                    scheduler.release(a.id());
                }
                CountDownLatch l = good.expect("round-" + rounds + "-4");
                assertThat(l.await(60, TimeUnit.SECONDS)).as("good client got round %d", rounds).isTrue();
                rounds++;
            }
            assertThat(console.eventHub().dropped()).isEqualTo(SLOW);
            assertThat(console.eventClients()).as("only the good client still gets events").isEqualTo(1);
            // queues stayed bounded: no client ever held more than the bound (+ one frame accepted into an empty
            // queue), and what is queued now is at most one bound per connection
            assertThat(console.eventHub().maxClientQueuedBytes()).isLessThanOrEqualTo(SseHub.MAX_QUEUED_BYTES);
            String scrape = get(console, "/metrics");
            assertThat(scrape).startsWith("HTTP/1.1 200");
            assertThat(metric(scrape, "gpusched_console_event_dropped_total")).isEqualTo(SLOW);
            assertThat(metric(scrape, "gpusched_console_event_clients")).isEqualTo(1);
            assertThat(metric(scrape, "gpusched_console_event_queued_bytes"))
                    .isLessThanOrEqualTo((double) SseHub.MAX_QUEUED_BYTES);

            // while the slow sockets are still open and unread: REST answers and the good client follows
            assertThat(get(console, "/api/v1/node")).startsWith("HTTP/1.1 200").contains("\"eventClientsDropped\":"
                    + SLOW);
            Allocation marker = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=after-the-drop"));
            assertThat(good.expect("after-the-drop").await(60, TimeUnit.SECONDS)).isTrue();
            scheduler.release(marker.id());
            for (int k = 0; k < 50; k++) { // more events after the drop: the good client gets them, no slow one
                scheduler.release(scheduler.allocate(GpuRequests.fromCliFlags("--gpu=8", "--owner=later-" + k)).id());
                if (k % 5 == 4) { // paced as above, so the good client is never the one that falls behind
                    assertThat(good.expect("later-" + k).await(60, TimeUnit.SECONDS)).as("later-%d", k).isTrue();
                }
            }
            assertThat(console.eventHub().dropped()).as("the good client was never dropped").isEqualTo(SLOW);

            // the server let go of every dropped connection by itself, though none of them has read a byte: only
            // the good client holds a slot (and a writer) now
            while (console.eventHub().connections() > 1) {
                Thread.sleep(10);
            }
            // the slow clients read at last: each stream ends (the server closed it), and holds only what was sent
            // before the drop: later frames were dropped, not buffered
            long goodBytes = good.bytes.get();
            long slowMax = 0;
            // each read at once (a socket with a 1 KiB window drains its megabytes slowly; one after another took 14 s)
            ExecutorService readers = Executors.newFixedThreadPool(SLOW);
            try {
                List<Future<byte[]>> streams = new ArrayList<>();
                for (Socket s : slow) {
                    streams.add(readers.submit(() -> readToEnd(s)));
                }
                for (Future<byte[]> f : streams) {
                    byte[] got;
                    try {
                        got = f.get();
                    } catch (ExecutionException e) {
                        throw new AssertionError(e.getCause().getMessage(), e.getCause());
                    }
                    assertThat(new String(got, StandardCharsets.UTF_8)).startsWith("HTTP/1.1 200")
                            .contains("text/event-stream").contains("round-0-0")
                            .doesNotContain("after-the-drop").doesNotContain("later-");
                    slowMax = Math.max(slowMax, got.length);
                }
            } finally {
                readers.shutdownNow();
            }
            assertThat(slowMax).isLessThan(goodBytes);
            assertThat(console.eventHub().queuedBytes()).isLessThanOrEqualTo(SseHub.MAX_QUEUED_BYTES);
            System.out.printf("slow-client attack: %d rounds (%d allocate+release each); %d slow clients dropped;"
                    + " good client read %d bytes, a slow one at most %d; largest client queue %d bytes%n",
                    rounds, 5, console.eventHub().dropped(), goodBytes, slowMax,
                    console.eventHub().maxClientQueuedBytes());
        } finally {
            for (Socket s : slow) {
                s.close();
            }
            if (goodSocket != null) {
                goodSocket.close();
            }
            inventory.close();
        }
    }

    /**
     * The other drop path: a quiet node (few events), so a client that does not read never fills its queue, but its
     * write stays blocked on a full socket. The stall check (run here by the test, with a stall limit of 1 ns) drops
     * it and the server closes the connection, though the client never reads.
     */
    @Test
    @org.junit.jupiter.api.Timeout(value = 10, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void aWriteBlockedPastTheStallLimitDropsItsClient() throws Exception {
        SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        Socket s = null;
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
             ConsoleServer console = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                     .stateDir(state).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0))
                     .ticking(false).eventStall(java.time.Duration.ofNanos(1)).build().start()) {
            SseHub hub = console.eventHub();
            s = subscribe(console, 1024);
            while (hub.connections() < 1) {
                Thread.sleep(10);
            }
            // events until the writer is stuck: something stays queued while nothing more is published
            int rounds = 0;
            while (true) {
                for (int k = 0; k < 5; k++) {
                    scheduler.release(scheduler.allocate(GpuRequests.fromCliFlags("--gpu=4")).id());
                }
                rounds++;
                assertThat(hub.dropped()).as("dropped by its queue before its write stalled").isZero();
                if (stillQueuedAfter(hub, 200)) {
                    break; // nothing published for a while and still queued: the write is blocked
                }
                assertThat(rounds).isLessThan(10_000);
            }
            assertThat(hub.queuedBytes()).isLessThan(SseHub.MAX_QUEUED_BYTES);
            int checks = 0;
            while (hub.dropped() == 0) {
                hub.heartbeat();
                // 1,000 checks queue 8 KB of pings, far under the queue bound: the stall check drops it, not the bound
                assertThat(++checks).as("stall checks before the drop").isLessThan(1_000);
            }
            assertThat(hub.dropped()).isEqualTo(1);
            while (hub.connections() > 0) { // closed by the server, the client never having read
                Thread.sleep(10);
            }
            assertThat(hub.queuedBytes()).isZero();
            s.setSoTimeout(30_000);
            byte[] buf = new byte[65536];
            try (InputStream in = s.getInputStream()) {
                while (in.read(buf) > 0) {
                    // what was in the socket buffers before the drop, then the end of the stream
                }
            } catch (SocketTimeoutException e) {
                throw new AssertionError("the stalled client's stream was not closed", e);
            } catch (IOException reset) {
                // closed with a reset: closed all the same
            }
        } finally {
            if (s != null) {
                s.close();
            }
            inventory.close();
        }
    }
}
