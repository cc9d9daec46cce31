package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * docs/SERVICE.md, Jobs: "A job that hands its stdout or stderr to a process outside it (over a Unix socket) cannot
 * keep the service reading: once the job's processes have ended, what that process writes is relayed for up to 10 s,
 * then the service lets the pipe go (its writes fail, EPIPE) and the exit line follows." Review12 checked it with a
 * client that reads at once. Here the client reads steadily but slower than the outside process writes (a slow link,
 * a 100 ms heartbeat): the job's output is always backlogged, and Jobs.awaitOutput waits without bound while the sink
 * is backlogged, so the outside process keeps the service relaying, the exit line never comes and `gpusched run`
 * never returns. The client is given 45 s after the job's end (its 10 s and then some).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OutsideHolderAndASlowClientAttackTest {

    @Test
    void aSlowClientStillGetsItsExitLineOnceTheOutsideHoldersRelayIsLetGo(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            bed.heartbeat = Duration.ofMillis(100);
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "echo ready; exec sleep 2")));
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong written = new AtomicLong();
            try {
                String pid = null;
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (pid == null && System.nanoTime() < until) {
                    for (String p : Clients.jobProcesses(bed.jobParent)) {
                        try {
                            if (Files.readString(Path.of("/proc", p, "comm")).strip().equals("sleep")) {
                                pid = p;
                            }
                        } catch (IOException gone) {
                            // not it
                        }
                    }
                    Thread.sleep(10);
                }
                assertThat(pid).as("the job's sleep").isNotNull();
                // root holds the job's stdout, as a process given the descriptor over SCM_RIGHTS would
                FileOutputStream out = new FileOutputStream("/proc/" + pid + "/fd/1");
                Thread holder = new Thread(() -> {
                    byte[] block =
                            "held by a process outside the job\n".repeat(500).getBytes(StandardCharsets.US_ASCII);
                    try (out) {
                        while (!stop.get()) {
                            out.write(block);
                            written.addAndGet(block.length);
                        }
                    } catch (IOException e) {
                        // EPIPE once the relay was let go: expected
                    }
                }, "review13-outside-holder");
                holder.setDaemon(true);
                holder.start();
                String job = Clients.awaitRunning(s, 60);
                assertThat(Clients.await(() -> !"RUNNING".equals(Clients.job(s, job).get("state")), 60)).as(
                        "the job's sleep ended").isTrue();
                long ended = System.nanoTime();
                // a slow client: 8 KiB every 50 ms, for up to 45 s after the job's end, until its exit line
                ByteArrayOutputStream got = new ByteArrayOutputStream();
                InputStream in = client.getInputStream();
                byte[] buf = new byte[8 * 1024];
                boolean exit = false;
                while (!exit && System.nanoTime() - ended < TimeUnit.SECONDS.toNanos(45)) {
                    int n = in.read(buf);
                    if (n < 0) {
                        break;
                    }
                    got.write(buf, 0, n);
                    String tail = new String(buf, 0, n, StandardCharsets.US_ASCII);
                    exit = tail.contains("\"type\":\"exit\"") || got.size() < 4096
                            && got.toString(StandardCharsets.US_ASCII).contains("\"type\":\"exit\"");
                    Thread.sleep(50);
                }
                long relayedAfter = got.size();
                System.out.printf("review13 outside holder: exit %s after %d ms, %d bytes read, %d written%n", exit,
                        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - ended), relayedAfter, written.get());
                assertThat(exit).as("alice's client (reading 8 KiB every 50 ms) got its exit line within 45 s of the"
                        + " job's end; meanwhile it read %d bytes of the outside holder's output (%d written), the"
                        + " holder still writing: %s", relayedAfter, written.get(), !stop.get() && holder.isAlive())
                        .isTrue();
            } finally {
                stop.set(true);
                Clients.cleanUp(bed, alice, client);
            }
        }
    }
}
