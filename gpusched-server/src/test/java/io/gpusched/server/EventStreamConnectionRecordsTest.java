package io.gpusched.server;

import static io.gpusched.server.SlowEventClientsAttackTest.get;
import static io.gpusched.server.SlowEventClientsAttackTest.subscribe;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.SlowEventClientsAttackTest.Reader;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Event streams that end abnormally must not leave the server's connection behind (the JDK server, which served the
 * console before Jetty, kept a record of such connections until it stopped; the console ends such a stream by
 * throwing from its handler, which makes the server abort and forget the connection). Checked from outside the
 * console: the server's own set of connections ({@link ServerConnections}) comes
 * back to the number of connections still open after many streams whose clients hung up, after slow clients were
 * dropped, and after a stalled client was dropped. And the cost of the fix is checked: handlers held for a stream's
 * life do not starve REST requests, the event-client limit still answers 503, and closing the server with a stuck
 * client and held handlers returns.
 */
class EventStreamConnectionRecordsTest {
    @TempDir
    Path state;

    /** A node, its scheduler forwarding events to the console, and the console. */
    final class Node implements AutoCloseable {
        final SimulatedGpuInventory inventory = GpuInventories.simulated("dgx1-v100");
        final GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        final ConsoleServer console;
        final List<Socket> sockets = new ArrayList<>();
        final List<Thread> readerThreads = new ArrayList<>();
        private boolean consoleClosed;

        Node(UnaryOperator<ConsoleServer.Builder> options) {
            console = options.apply(ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                    .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).ticking(false)).build()
                    .start();
        }

        /** one allocate + release: two events to every client */
        void event(String owner) {
            scheduler.release(scheduler.allocate(GpuRequests.fromCliFlags("--gpu=8", "--owner=" + owner)).id());
        }

        /** a client that reads its stream, once its first event arrived */
        Reader reader() throws Exception {
            Socket s = subscribe(console, 0);
            sockets.add(s);
            Reader r = new Reader(s);
            Thread t = new Thread(r, "reading-sse-client");
            t.setDaemon(true);
            t.start();
            readerThreads.add(t);
            assertThat(r.expect("event: state").await(60, TimeUnit.SECONDS)).as("first event").isTrue();
            return r;
        }

        void awaitConnections(int n) throws InterruptedException {
            while (console.eventHub().connections() != n) {
                Thread.sleep(5);
            }
        }

        void closeConsole() {
            if (!consoleClosed) {
                consoleClosed = true;
                console.close();
            }
        }

        @Override
        public void close() throws IOException {
            try {
                closeConsole();
                scheduler.close();
            } finally {
                for (Socket s : sockets) {
                    s.close();
                }
                inventory.close();
            }
        }
    }

    static void assertClosedByServer(Socket s) throws IOException {
        s.setSoTimeout(30_000);
        byte[] buf = new byte[65536];
        try (InputStream in = s.getInputStream()) {
            while (in.read(buf) > 0) {
                // what was in the socket buffers, then the end of the stream
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server did not close this event stream", e);
        } catch (IOException reset) {
            // closed with a reset: closed all the same
        }
    }

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void streamsWhoseClientsHungUpLeaveNoConnectionRecord() throws Exception {
        try (Node node = new Node(b -> b)) {
            Reader good = node.reader();
            ServerConnections records = ServerConnections.of(node.console);
            records.awaitCount(1, "with one client");
            int rounds = 5;
            int perRound = 40;
            for (int r = 0; r < rounds; r++) {
                List<Socket> round = new ArrayList<>();
                for (int i = 0; i < perRound; i++) {
                    round.add(subscribe(node.console, 0));
                }
                node.awaitConnections(perRound + 1); // each has its headers and first event written or queued
                for (Socket s : round) {
                    s.close(); // a browser reload: the client hangs up
                }
                // writes to them fail once the peer has reset: the hub lets go of them
                int events = 0;
                while (node.console.eventHub().connections() > 1) {
                    String owner = "round-" + r + "-" + events++;
                    CountDownLatch seen = good.expect(owner);
                    node.event(owner);
                    assertThat(seen.await(60, TimeUnit.SECONDS)).as("the open stream got %s", owner).isTrue();
                    assertThat(events).as("hung-up clients still held").isLessThan(100_000);
                }
            }
            records.awaitCount(1, "after " + rounds * perRound + " streams whose clients hung up");
            while (node.console.heldWorkers() != 1) { // their handlers gave their worker threads back
                Thread.sleep(5);
            }
            CountDownLatch l = good.expect("after-hang-ups");
            node.event("after-hang-ups");
            assertThat(l.await(60, TimeUnit.SECONDS)).as("the open stream still gets events").isTrue();
            assertThat(records.count()).isEqualTo(1);
        }
    }

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void droppedSlowClientsLeaveNoConnectionRecord() throws Exception {
        int slowClients = 24;
        try (Node node = new Node(b -> b)) {
            Reader good = node.reader();
            ServerConnections records = ServerConnections.of(node.console);
            List<Socket> slow = new ArrayList<>();
            for (int i = 0; i < slowClients; i++) {
                Socket s = subscribe(node.console, 1024); // never reads
                slow.add(s);
                node.sockets.add(s);
            }
            node.awaitConnections(slowClients + 1);
            records.awaitCount(slowClients + 1, "with every client subscribed");
            int rounds = 0;
            while (node.console.eventHub().dropped() < slowClients) {
                assertThat(rounds).as("slow clients dropped: %d", node.console.eventHub().dropped())
                        .isLessThan(5000);
                for (int k = 0; k < 5; k++) {
                    node.event("round-" + rounds + "-" + k);
                }
                // paced by the good client, so it is never the one that falls behind
                assertThat(good.expect("round-" + rounds + "-4").await(60, TimeUnit.SECONDS)).isTrue();
                rounds++;
            }
            assertThat(node.console.eventHub().dropped()).isEqualTo(slowClients);
            node.awaitConnections(1);
            // the slow sockets are still open and have never read: the server forgot them all the same
            records.awaitCount(1, "after " + slowClients + " slow clients were dropped");
            for (Socket s : slow) {
                assertClosedByServer(s);
            }
            assertThat(get(node.console, "/api/v1/node")).startsWith("HTTP/1.1 200");
            records.awaitCount(1, "after a REST request on a connection of its own");
        }
    }

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void aStalledClientDroppedLeavesNoConnectionRecord() throws Exception {
        try (Node node = new Node(b -> b.eventStall(Duration.ofNanos(1)))) {
            SseHub hub = node.console.eventHub();
            Socket s = subscribe(node.console, 1024);
            node.sockets.add(s);
            node.awaitConnections(1);
            ServerConnections records = ServerConnections.of(node.console);
            records.awaitCount(1, "with one client");
            blockItsWriter(node);
            int checks = 0;
            while (hub.dropped() == 0) {
                hub.heartbeat(); // the stall check (limit 1 ns)
                // 1,000 checks queue 8 KB of pings, far under the queue bound: the stall check drops it, not the bound
                assertThat(++checks).as("stall checks before the drop").isLessThan(1_000);
            }
            node.awaitConnections(0);
            records.awaitCount(0, "after the stalled client was dropped");
            assertClosedByServer(s);
        }
    }

    /** events until the one client's writer is stuck: something stays queued while nothing more is published */
    static void blockItsWriter(Node node) throws InterruptedException {
        SseHub hub = node.console.eventHub();
        int rounds = 0;
        while (true) {
            for (int k = 0; k < 5; k++) {
                node.event("fill-" + rounds + "-" + k);
            }
            rounds++;
            assertThat(hub.dropped()).as("dropped by its queue before its write stalled").isZero();
            if (SlowEventClientsAttackTest.stillQueuedAfter(hub, 200)) {
                return; // nothing published for a while and still queued: the write is blocked
            }
            assertThat(rounds).isLessThan(10_000);
        }
    }

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void heldStreamHandlersDoNotStarveRequestsAndTheClientLimitHolds() throws Exception {
        int threads = 2;
        int streams = 6;
        try (Node node = new Node(b -> b.threads(threads).maxSseClients(streams))) {
            List<Reader> readers = new ArrayList<>();
            for (int i = 0; i < streams; i++) {
                readers.add(node.reader()); // each holds a worker for its stream's life
            }
            while (node.console.heldWorkers() != streams) { // each stream's handler holds a worker
                Thread.sleep(5);
            }
            // one over the limit: refused, while the others stay open
            String refused = SlowEventClientsAttackTest.get(node.console, "/api/v1/events");
            assertThat(refused).startsWith("HTTP/1.1 503").contains("too many event-stream clients");
            for (int i = 0; i < 3 * threads; i++) {
                assertThat(get(node.console, "/api/v1/node")).as("REST request %d with %d streams open", i,
                        streams).startsWith("HTTP/1.1 200");
            }
            CountDownLatch[] seen = new CountDownLatch[streams];
            for (int i = 0; i < streams; i++) {
                seen[i] = readers.get(i).expect("still-served");
            }
            node.event("still-served");
            for (CountDownLatch l : seen) {
                assertThat(l.await(60, TimeUnit.SECONDS)).isTrue();
            }
        }
    }

    @Test
    @Timeout(value = 5, unit = TimeUnit.MINUTES) // a hang guard, not a measurement
    void closingTheServerWithAStuckClientReturnsAndEndsEveryStream() throws Exception {
        Node node = new Node(b -> b);
        Socket stuck;
        try {
            node.reader();
            node.reader();
            stuck = subscribe(node.console, 1024);
            node.sockets.add(stuck);
            node.awaitConnections(3);
            blockItsWriter(node); // the stuck client's writer is blocked in a write; its handler is held
            assertThat(node.console.eventHub().dropped()).isZero();
        } catch (Throwable t) {
            node.close();
            throw t;
        }
        node.closeConsole(); // must return though a write is blocked and three handlers are held
        try {
            for (Thread t : node.readerThreads) { // a reader ends when its stream ends
                t.join(60_000);
                assertThat(t.isAlive()).as("a reading client's stream did not end").isFalse();
            }
            assertClosedByServer(stuck);
        } finally {
            node.close();
        }
    }
}
