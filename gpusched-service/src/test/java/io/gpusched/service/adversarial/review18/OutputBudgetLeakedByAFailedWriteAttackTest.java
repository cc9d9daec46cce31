package io.gpusched.service.adversarial.review18;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.FullDisk;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
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
 * Review18: is the output budget of a user's running detached jobs returned when they end? Not what a failed write
 * took: {@code OutputFile.output} takes {@code n} bytes from the budget ({@code budget.take}) before it writes them,
 * and counts them in {@code written} (what {@code exit} gives back) only after the write succeeded; a write that fails
 * (the disk full for a moment) keeps them taken for as long as the service runs. Each such moment costs the user up to
 * a read's 16 KiB; enough of them and every later detached job of the user is cut at its first line: silenced until a
 * restart.
 *
 * <p>Here, with the budget shrunk to 3,000 bytes: alice's first job prints 2,500 bytes while the disk is full, and
 * ends; the disk is freed; her next job, alone, prints 2,000 bytes, well within the 3,000, and is cut.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OutputBudgetLeakedByAFailedWriteAttackTest {

    @Test
    void aWriteThatFailedOnAFullDiskDoesNotKeepTheUsersBudget(@TempDir Path tmp) throws Exception {
        long old = ServiceBed.keepOutputBytes(3_000);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs();
             FullDisk disk = FullDisk.over(bed.state.resolve("jobs"), "gsu-review18")) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.start();
            bed.serve();
            Path home = Clients.homeOf(tmp, alice);
            disk.fill();
            // (it ends by itself: a write the disk refuses no longer ends the job, FullOutputDiskEndsTheJobAttackTest)
            String first = submit(bed, alice, home, "head -c 2500 /dev/zero | tr '\\0' x");
            assertThat(Clients.await(() -> !"RUNNING".equals(Clients.job(bed.service, first).get("state"))
                    && !"QUEUED".equals(Clients.job(bed.service, first).get("state")), 60)).as(
                            "alice's first job, its output not written, ended: %s", Clients.job(bed.service, first))
                    .isTrue();
            disk.free();

            String second = submit(bed, alice, home, "head -c 2000 /dev/zero | tr '\\0' x; exec sleep 60");
            Path out = disk.dir.resolve(second + ".out");
            assertThat(Clients.await(() -> text(out).length() >= 2000 || text(out).contains("[gpusched: "), 60))
                    .as("alice's second job's output is written or cut").isTrue();
            assertThat(text(out)).as("alice's second job's output (alone, 2,000 bytes; her budget is 3,000 and her"
                    + " first job ended)").doesNotContain("[gpusched: ").hasSize(2000);
        } finally {
            ServiceBed.keepOutputBytes(old);
        }
    }

    private static String submit(ServiceBed bed, LocalUsers.User u, Path home, String script) throws Exception {
        Map<String, Object> r = Clients.jobRequest(home, List.of("/bin/sh", "-c", script), "--gpu=1");
        r.put("detach", true);
        Answer a = bed.post(u, "/api/v1/jobs", Clients.JSON.writeValueAsString(r));
        assertThat(a.status()).as(a.body()).isEqualTo(201);
        return Clients.JSON.readTree(a.body()).path("id").asText();
    }

    private static String text(Path f) {
        try {
            return Files.readString(f, StandardCharsets.ISO_8859_1);
        } catch (IOException e) {
            return "";
        }
    }
}
