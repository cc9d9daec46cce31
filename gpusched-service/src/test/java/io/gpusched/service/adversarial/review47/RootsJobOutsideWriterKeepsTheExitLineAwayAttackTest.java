package io.gpusched.service.adversarial.review47;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.FileOutputStream;
import java.io.IOException;
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
 * keep the service reading: once the job's processes have ended, what that process writes is relayed for up to 10 s
 * spent waiting on the pipe (...), and never more than a pipe can hold (/proc/sys/fs/pipe-max-size, 1 MiB by default)
 * however slowly the client reads, then the service lets the pipe go (its writes fail, EPIPE) and the exit line
 * follows." The docs make no exception for root (root and admins run jobs through the service: `sudo gpusched run`).
 *
 * <p>Since 4455f01b the 10 s are counted only while the relay is in a read of the pipe (OutputRelay.readingSinceEnd).
 * A process outside the job that writes without pause keeps the pipe full, so every read returns at once: the relay
 * never spends 10 s in reads. For an ordinary user's job the byte bound (pipe-max-size + 16 KiB) still ends it, but
 * root's job is not held to it (Jobs.run: {@code uid() == 0 ? Long.MAX_VALUE}, since review15): nothing ends the relay
 * any more (before, 10 s of wall time since the end did). Root's job here raises its stdout to 1 MiB, then sleeps;
 * root outside the job writes its stdout without pause; the client reads steadily (64 KiB every 10 ms: a pipe's 1 MiB
 * in a sixth of a second). The job ends; its exit line never comes, and the service relays the outside writer's output
 * for as long as it writes (run 1, reading as fast as it came: 7.7 GB in the 45 s after the end, no exit line).
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class RootsJobOutsideWriterKeepsTheExitLineAwayAttackTest {

    @Test
    void rootsJobsClientGetsItsExitLineThoughAProcessOutsideTheJobWritesItsStdoutWithoutPause(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User root = new LocalUsers.User("root", 0, 0);
            Process client = Clients.attached(bed, root, Clients.jobBody(tmp, List.of("/usr/bin/perl", "-e",
                    "fcntl(STDOUT, 1031, 1048576) or die \"F_SETPIPE_SZ: $!\\n\"; exec \"sleep\", \"4\"")));
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong written = new AtomicLong();
            Thread holder = null;
            try {
                Review47.Stream stream = new Review47.Stream(client, 64 * 1024, 10);
                String job = Clients.awaitRunning(s, 60);
                String pid = Review47.awaitProcess(bed.jobParent, "sleep", 60);
                FileOutputStream out = new FileOutputStream("/proc/" + pid + "/fd/1");
                holder = new Thread(() -> {
                    byte[] block = "written by a process outside the job\n".repeat(1700).getBytes(
                            StandardCharsets.US_ASCII);
                    try (out) {
                        while (!stop.get()) {
                            out.write(block);
                            written.addAndGet(block.length);
                        }
                    } catch (IOException e) {
                        // EPIPE once the relay was let go: expected
                    }
                }, "review47-outside-writer");
                holder.setDaemon(true);
                holder.start();
                assertThat(Clients.await(() -> !"RUNNING".equals(Clients.job(s, job).get("state")), 60)).as(
                        "root's job's sleep ended").isTrue();
                long atEnd = stream.bytes.get();
                long endedAt = System.nanoTime();
                Clients.await(() -> stream.exit || stream.ended, Duration.ofSeconds(40));
                long afterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - endedAt);
                long since = stream.bytes.get() - atEnd;
                System.out.printf("review47 root's job with an outside writer: exit %s, stream ended %s, %d ms after"
                        + " the end; %d bytes of stream since the end, %d written by the holder; the holder still"
                        + " writing: %s%n", stream.exit, stream.ended, afterMs, since, written.get(), holder.isAlive());
                assertThat(stream.exit).as("root's job ended; a process outside it writes its stdout without pause;"
                        + " its client reads steadily (64 KiB every 10 ms). The docs: relayed for up to 10 s spent"
                        + " waiting on the pipe, never more than a pipe can hold (1 MiB), then the pipe is let go and"
                        + " the exit line follows. %d ms after the end: no exit line; the client got %d bytes of"
                        + " stream since the end (a pipe holds %s), the outside process wrote %d and its writes still"
                        + " succeed: %s",
                        afterMs, since, Files.readAllLines(Path.of("/proc/sys/fs/pipe-max-size")).get(0).strip(),
                        written.get(), holder.isAlive()).isTrue();
            } finally {
                stop.set(true);
                if (holder != null) {
                    holder.join(30_000);
                }
                client.destroyForcibly();
                client.waitFor(30, TimeUnit.SECONDS);
                for (Path cg : Clients.jobCgroups(bed.jobParent)) {
                    try {
                        Files.writeString(cg.resolve("cgroup.kill"), "1");
                    } catch (IOException gone) {
                        // removed meanwhile
                    }
                }
            }
        }
    }
}
