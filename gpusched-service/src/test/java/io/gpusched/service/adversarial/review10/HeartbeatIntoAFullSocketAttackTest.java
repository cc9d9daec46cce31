package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The heartbeat "skips a stream whose write is blocked" (StreamSink.heartbeat: {@code tryLock}), but it still writes,
 * and blocks, when no write is under way and the socket is full: a client that stopped reading just as the job went
 * quiet. The kernel takes a write into a Unix stream socket whole as long as the socket is not yet full when it comes,
 * so the output line that fills it is taken whole: the relay returns to its read with the socket full and its lock
 * free. The next heartbeat's one byte then blocks the job's driver itself, and it no longer sees the job end: a cancel
 * (or the stop) ends the job, but the GPU stays held. alice's job copies what the test writes into a FIFO to its
 * stdout ({@code cat}); the test feeds it 8 KiB at a time, each time until the relay is back in its read, until the
 * service's end of the socket is full ({@code ss -xm}: {@code t >= tb}), then waits for a heartbeat and cancels.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class HeartbeatIntoAFullSocketAttackTest {
    private static final Pattern SKMEM = Pattern.compile("skmem:\\(r\\d+,rb\\d+,t(\\d+),tb(\\d+)");
    /**
     * The service's heartbeat here (its default is 5 s; 100 ms is the least it takes): a quarter of the 1 s this test
     * first used, so that the wait for a heartbeat into the full socket below holds as many heartbeats as before (15)
     * in a quarter of the time.
     */
    private static final Duration HEARTBEAT = Duration.ofMillis(250);
    /** How long a heartbeat into the full socket is waited for: 15 heartbeats (it was 15 s at a 1 s heartbeat). */
    private static final Duration HEARTBEAT_WAIT = HEARTBEAT.multipliedBy(15);

    @Test
    void aCancelReleasesTheGpuWhenTheHeartbeatMeetsAFullSocket(@TempDir Path tmp) throws Exception {
        attack(tmp, false);
    }

    @Test
    void theStopReleasesTheGpuWhenTheHeartbeatMeetsAFullSocket(@TempDir Path tmp) throws Exception {
        attack(tmp, true);
    }

    private static void attack(Path tmp, boolean stop) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            bed.heartbeat = HEARTBEAT;
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Path fifo = home.resolve("in.fifo");
            run(List.of("mkfifo", "-m", "666", fifo.toString()));
            Process client = Clients.attached(bed, alice, Clients.jobBody(home, List.of("/bin/sh", "-c",
                    "exec cat in.fifo")));
            try (OutputStream feed = new FileOutputStream(fifo.toFile())) {
                String job = Clients.awaitRunning(s, 60);
                String relay = "gpusched-job-out-" + job;
                boolean full = false;
                String last = "";
                byte[] chunk = Clients.repeat('z', 8 * 1024).getBytes(java.nio.charset.StandardCharsets.US_ASCII);
                for (int i = 0; i < 400 && !full; i++) {
                    feed.write(chunk);
                    feed.flush();
                    String where = settle(relay);
                    if (where.equals("write")) { // taken in part: let the client take a little, the relay goes on
                        Clients.readSome(client, 4 * 1024);
                        settle(relay);
                    }
                    last = skmem(bed);
                    full = isFull(last);
                }
                assertThat(full).as("the service's end of alice's socket filled with the relay idle (last %s)", last)
                        .isTrue();
                // a heartbeat comes within one HEARTBEAT of silence here; it writes, and blocks, as nothing else writes
                // (the defect: seen at the first heartbeat; without it the wait runs its 15 heartbeats)
                boolean stuck = Clients.await(() -> Clients.threadsIn("StreamSink").stream().anyMatch(t -> t.endsWith(
                        " in heartbeat")), HEARTBEAT_WAIT);
                String how;
                if (stop) {
                    s.close();
                    how = "once close() returned";
                } else {
                    ServiceBed.Answer a = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/jobs/" + job);
                    assertThat(a.status()).as("alice's cancel: %s", a.body()).isEqualTo(200);
                    how = "once alice's cancel returned (answered with the job "
                            + Clients.JSON.readTree(a.body()).path("state").asText() + ")";
                }
                assertThat(Clients.held(bed)).as("GPUs held %s (job %s %s; a heartbeat blocked: %s, threads in"
                        + " StreamSink %s)", how, job, Clients.job(s, job).get("state"), stuck,
                        Clients.threadsIn(
                                "StreamSink"))
                        .isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, client);
            }
        }
    }

    /** @return "read" once the relay waits in its read, "write" when it has been in a write for over a second */
    private static String settle(String relay) throws InterruptedException {
        long inWrite = -1;
        for (int i = 0; i < 200; i++) {
            String st = Clients.stackOf(relay);
            boolean writing = st.contains("StreamSink");
            if (!writing && st.contains("read")) {
                return "read";
            }
            if (writing) {
                inWrite = inWrite < 0 ? System.nanoTime() : inWrite;
                if (System.nanoTime() - inWrite > TimeUnit.SECONDS.toNanos(1)) {
                    return "write";
                }
            }
            Thread.sleep(10);
        }
        return "?";
    }

    /** @return the skmem of the service's end of the (one) connection on the bed's socket, from ss */
    private static String skmem(ServiceBed bed) throws IOException {
        LocalUsers.Result r = LocalUsers.run(List.of("ss", "-xmpH"), 30);
        String pid = "pid=" + ProcessHandle.current().pid() + ",";
        for (String l : r.out().split("\n")) {
            if (l.contains(bed.dir.toString()) && l.contains(pid) && l.contains("ESTAB")) {
                Matcher m = SKMEM.matcher(l);
                if (m.find()) {
                    return m.group(0);
                }
            }
        }
        return "";
    }

    private static boolean isFull(String skmem) {
        Matcher m = SKMEM.matcher(skmem);
        return m.find() && Long.parseLong(m.group(1)) >= Long.parseLong(m.group(2));
    }

    private static void run(List<String> cmd) throws IOException {
        LocalUsers.Result r = LocalUsers.run(cmd, 30);
        if (r.exit() != 0) {
            throw new IOException(cmd + ": " + r.err());
        }
    }
}
