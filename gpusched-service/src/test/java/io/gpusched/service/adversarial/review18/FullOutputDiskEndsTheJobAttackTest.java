package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.FullDisk;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review18: a full disk under the state directory ends every detached job that prints a line. Each user's output is
 * bounded (64 MiB a job, 256 MiB of running and 256 MiB of ended jobs per user), but all users' together are not, and
 * the state directory shares its disk with whatever else is on it ({@code /var}): users' output, other users' files.
 * When a write of a detached job's output fails ({@code ENOSPC}), {@code OutputFile.output} throws, and the relay
 * ({@code Jobs.relay}) takes that for "the client has gone": {@code clientGone} cancels the job ("its client went
 * away": TERM, KILL), although a detached job has no client and the documented answer to too much output is to drop
 * it ("the rest is dropped (still read, so the job never blocks)"). So once one user filled the disk, alice's
 * week-long training job is killed on its next log line. (The bytes it took from alice's output budget for the failed
 * write are not given back either: {@code written} is not counted.)
 *
 * <p>Here the state's {@code jobs} directory is a small tmpfs, filled (as another user's output would fill it) while
 * alice's detached job runs and prints.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class FullOutputDiskEndsTheJobAttackTest {

    @Test
    void aDetachedJobPrintingOntoAFullDiskRunsOn(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs();
             FullDisk disk = FullDisk.over(bed.state.resolve("jobs"), "gsu-review18")) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Path home = Clients.homeOf(tmp, alice);
            Map<String, Object> r = Clients.jobRequest(home, List.of("/bin/sh", "-c", "i=0; while :; do"
                    + " i=$((i+1)); head -c 1000 /dev/zero | tr '\\0' x; echo \" $i\"; echo $i > count.tmp;"
                    + " mv count.tmp count; sleep 0.1; done"), "--gpu=1");
            r.put("detach", true);
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(r));
            assertThat(a.status()).as(a.body()).isEqualTo(201);
            String id = Clients.JSON.readTree(a.body()).path("id").asText();
            assertThat(Clients.await(() -> count(home) >= 3, 60)).as("alice's job prints").isTrue();

            // the disk fills up (another user's output, anyone's files on the same file system)
            disk.fill();
            long at = count(home);
            // twenty lines of 1,000 bytes printed since: more than the last page of its file can still take
            boolean printed = Clients.await(() -> count(home) >= at + 20 || !"RUNNING".equals(state(bed,
                    id)), 60);
            JsonNode view = Clients.JSON.readTree(bed.curl(alice, "http://localhost/api/v1/jobs/" + id).body());
            assertThat(view.path("state").asText()).as("alice's detached job, %d lines printed onto the full disk"
                    + " (%s): %s", count(home) - at, printed, view).isEqualTo("RUNNING");
        }
    }

    private static long count(Path home) {
        try {
            return Long.parseLong(Files.readString(home.resolve("count")).strip());
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
    }

    private static String state(ServiceBed bed, String id) {
        return String.valueOf(Clients.job(bed.service, id).get("state"));
    }
}
