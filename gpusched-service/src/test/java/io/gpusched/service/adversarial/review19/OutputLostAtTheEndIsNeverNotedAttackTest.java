package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

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
 * Review19: a detached job's output the disk refused is dropped, and "the next write that succeeds is preceded by a
 * line saying how much was lost and why" (OutputFile.output). When the loss is the job's last output (its final lines,
 * the summary or the traceback a user reads first, printed while another user's files filled the disk), there is no
 * next write: OutputFile.exit closes the file without the note, so the kept output ends as if the job had printed
 * nothing more, although the disk had room again long before the job ended.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OutputLostAtTheEndIsNeverNotedAttackTest {

    @Test
    void outputDroppedByAFullDiskJustBeforeTheEndIsNotedInTheJobsOutput(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs();
             FullDisk disk = FullDisk.over(bed.state.resolve("jobs"), "gsu-review19")) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Path home = Clients.homeOf(tmp, alice);
            // prints a line a tenth of a second until "quiet" appears, says so in "done", then ends once "end" does
            Map<String, Object> r = Clients.jobRequest(home, List.of("/bin/sh", "-c", "i=0; while [ ! -e quiet ]; do"
                    + " i=$((i+1)); head -c 1000 /dev/zero | tr '\\0' x; echo \" $i\"; echo $i > count.tmp;"
                    + " mv count.tmp count; sleep 0.1; done; echo $i > done; while [ ! -e end ]; do sleep 0.1; done"),
                    "--gpu=1");
            r.put("detach", true);
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(r));
            assertThat(a.status()).as(a.body()).isEqualTo(201);
            String id = Clients.JSON.readTree(a.body()).path("id").asText();
            assertThat(Clients.await(() -> count(home, "count") >= 3, 60)).as("alice's job prints").isTrue();

            disk.fill();
            long at = count(home, "count");
            assertThat(Clients.await(() -> count(home, "count") >= at + 20, 60)).as("lines printed onto the full"
                    + " disk").isTrue();
            Files.writeString(home.resolve("quiet"), "");
            assertThat(Clients.await(() -> count(home, "done") > 0, 30)).as("the job stopped printing").isTrue();
            disk.free(); // the disk has room again; the job prints nothing more and ends
            Files.writeString(home.resolve("end"), "");
            assertThat(Clients.await(() -> !"RUNNING".equals(String.valueOf(Clients.job(bed.service, id).get(
                    "state"))), 60)).as("the job ended").isTrue();

            // what alice reads: its state turned when its processes ended; its logs wait until the output is final
            Answer logs = bed.curl(alice, "http://localhost/api/v1/jobs/" + id + "/logs");
            assertThat(logs.status()).as(logs.body()).isEqualTo(200);
            String kept = logs.body();
            long last = count(home, "done");
            assertThat(kept).as("alice's job's output (%d lines printed, the last %d while the disk was full; the"
                    + " output ends with: %s)", last, last - at, tail(kept)).contains("not kept");
        }
    }

    private static String tail(String s) {
        return s.length() <= 300 ? s : s.substring(s.length() - 300);
    }

    private static long count(Path home, String name) {
        try {
            return Long.parseLong(Files.readString(home.resolve(name)).strip());
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
    }
}
