package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.testing.LocalUsers.User;
import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job can pass the write end of its stdout to a process outside its cgroup (over a Unix socket, {@code SCM_RIGHTS}),
 * which then holds the pipe open after every process of the job has ended. The job's reader (the node service's
 * relay) must still be let go: interrupting it ends its read, and the outside process's writes then fail
 * ({@code EPIPE}: nobody in the service still reads). With the JDK's own pipe streams the read stayed blocked for as
 * long as the outside process lived, one service thread per stream. Here this test plays the outside process: as root
 * it opens the job's stdout through {@code /proc/PID/fd/1}, which gives it a write end of the same pipe, as a passed
 * descriptor would.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class OutputHeldOutsideTheJobTest {
    @Test
    void theReaderOfAJobsStdoutIsLetGoWhileAProcessOutsideTheJobHoldsThePipe(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            LaunchedJob j = jb.launch(jb.spec(alice, List.of("/bin/sh", "-c", "echo hello; exec sleep 600"), Map.of()),
                    jb.gpus(0));
            InputStream out = j.stdout();
            ByteArrayOutputStream read = new ByteArrayOutputStream();
            Thread reader = new Thread(() -> {
                byte[] buf = new byte[4096];
                try {
                    for (int n; (n = out.read(buf)) > 0;) {
                        synchronized (read) {
                            read.write(buf, 0, n);
                        }
                    }
                } catch (IOException e) {
                    // let go: what this test checks
                }
            }, "output-held-reader");
            reader.setDaemon(true);
            reader.start();
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!readSoFar(read).contains("hello") && System.nanoTime() < until) {
                Thread.sleep(20);
            }
            assertThat(readSoFar(read)).as("the job's first line").isEqualTo("hello\n");
            try (FileOutputStream holder = new FileOutputStream("/proc/" + j.pid() + "/fd/1")) {
                assertThat(j.cleanUp()).as("the job ended, its cgroup gone").isEmpty();
                holder.write("still here\n".getBytes(StandardCharsets.UTF_8)); // the pipe lives on: its reader reads
                until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!readSoFar(read).contains("still here") && System.nanoTime() < until) {
                    Thread.sleep(20);
                }
                assertThat(readSoFar(read)).as("what the outside holder wrote, read after the job ended")
                        .isEqualTo("hello\nstill here\n");
                assertThat(reader.isAlive()).as("the reader waits on a pipe the outside process holds").isTrue();
                reader.interrupt();
                reader.join(TimeUnit.SECONDS.toMillis(60));
                assertThat(reader.isAlive()).as("the reader, interrupted while an outside process holds the pipe, is"
                        + " still blocked in its read").isFalse();
                assertThatThrownBy(() -> {
                    for (int i = 0; i < 1024; i++) { // a pipe's buffer is far smaller: a write fails once none reads
                        holder.write(new byte[4096]);
                    }
                }).as("writes once the job's reader was let go (nobody in this process still reads the pipe)")
                        .isInstanceOf(IOException.class);
            }
        }
    }

    private static String readSoFar(ByteArrayOutputStream read) {
        synchronized (read) {
            return read.toString(StandardCharsets.UTF_8);
        }
    }
}
