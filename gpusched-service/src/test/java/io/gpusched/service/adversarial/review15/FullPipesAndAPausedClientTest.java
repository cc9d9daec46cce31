package io.gpusched.service.adversarial.review15;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.ByteArrayOutputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review15, the relay budget (Jobs.PIPE_MAX_BYTES): once a job's processes ended, a relay reads at most
 * /proc/sys/fs/pipe-max-size + 16 KiB more, then closes the pipe. A job that raised its pipes with F_SETPIPE_SZ and
 * filled them (stdout and stderr), whose client does not read until the job ended, must still get every byte of its
 * own output, then its exit line last. pipe-max-size bounds what an unprivileged process may set; a process with
 * CAP_SYS_RESOURCE (root's job: root and admins run jobs through the service) may set more (pipe(7), fcntl(2)).
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class FullPipesAndAPausedClientTest {
    /** Raises stdout's and stderr's pipes to N bytes (dies if refused), fills each, exits 0. */
    private static final String FILL = "my $n = 0 + shift; for my $fh (\\*STDOUT, \\*STDERR) { fcntl($fh, 1031, $n)"
            + " or die \"F_SETPIPE_SZ $n: $!\" } print STDOUT \"o\" x $n; print STDERR \"e\" x $n;";

    private static void run(Path tmp, boolean root, int bytes) throws Exception {
        if (root) { // CAP_SYS_RESOURCE (a sandbox's root may lack it): can root raise a pipe past pipe-max-size here?
            Process p = new ProcessBuilder("/usr/bin/perl", "-e", "fcntl(STDOUT, 1031, " + bytes + ") or exit 3;")
                    .redirectOutput(ProcessBuilder.Redirect.PIPE).start();
            assumeTrue(p.waitFor() == 0, "root here cannot raise a pipe past pipe-max-size (no CAP_SYS_RESOURCE)");
        }
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(1))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User user = root ? new LocalUsers.User("root", 0, 0) : bed.accounts.user("alice");
            Path cwd = root ? tmp : Clients.homeOf(tmp, user);
            Process client = Clients.attached(bed, user, Clients.jobBody(cwd, List.of("/usr/bin/perl", "-e", FILL,
                    String.valueOf(bytes))));
            try {
                String job = Clients.awaitRunning(s, 60);
                // the client reads nothing until the job's processes are gone (a paused terminal, a slow link)
                assertThat(Clients.await(() -> {
                    try {
                        return Clients.jobProcesses(bed.jobParent).isEmpty();
                    } catch (Exception e) {
                        return false;
                    }
                }, 60)).as("job %s's processes ended", job).isTrue();
                Thread.sleep(5_000); // the relays meet their budget (or not) while the client still reads nothing
                byte[] raw = Clients.readAll(client, 90);
                Clients.Ndjson n = Clients.Ndjson.of(raw);
                ByteArrayOutputStream err = new ByteArrayOutputStream();
                JsonNode exit = null;
                for (JsonNode l : n.lines()) {
                    if (l.path("type").asText().equals("stderr")) {
                        err.write(Base64.getDecoder().decode(l.path("data").asText()));
                    }
                    if (l.path("type").asText().equals("exit")) {
                        exit = l;
                    }
                }
                String summary = n.summary();
                System.out.printf("review15 %s job, pipes of %d: stdout %d, stderr %d bytes; %s%n", user.name(), bytes,
                        n.stdout().length, err.size(), summary);
                assertThat(exit).as("the exit line (%s)", summary).isNotNull();
                assertThat(exit.toString()).as("the job's own exit (F_SETPIPE_SZ to %d accepted; stderr starts %s)",
                        bytes, err.toString().substring(0, Math.min(200, err.size()))).contains("\"code\":0");
                assertThat(n.types().get(n.types().size() - 1)).as("the last line (%s)", summary).isEqualTo("exit");
                assertThat(n.stdout().length).as("%s's job wrote %d bytes to stdout (its pipe raised to hold them all),"
                        + " then ended; its client, which read nothing until then, got %d of them (stream: %s)",
                        user.name(), bytes, n.stdout().length, summary).isEqualTo(bytes);
                assertThat(err.size()).as("%s's job's stderr", user.name()).isEqualTo(bytes);
            } finally {
                client.destroyForcibly();
                client.waitFor(30, TimeUnit.SECONDS);
                if (!root) {
                    LocalUsers.run(List.of("pkill", "-KILL", "-U", String.valueOf(user.uid())), 30);
                }
            }
        }
    }

    /** An ordinary user's job, both pipes at pipe-max-size (1 MiB) and full when it ends. */
    @Test
    void anOrdinaryJobWithFullMaximalPipesKeepsAllItsOutput(@TempDir Path tmp) throws Exception {
        run(tmp, false, 1 << 20);
    }

    /**
     * Root's job (an admin's `sudo gpusched run`): CAP_SYS_RESOURCE lets it raise a pipe past pipe-max-size, here to
     * 8 MiB. Once its processes ended the relay reads 1 MiB + 16 KiB and closes the pipe (Jobs.java relay,
     * afterEnd = PIPE_MAX_BYTES): the rest of the job's own output is dropped without a word.
     */
    @Test
    void rootsJobWithPipesPastPipeMaxSizeKeepsAllItsOutput(@TempDir Path tmp) throws Exception {
        run(tmp, true, 8 << 20);
    }
}
