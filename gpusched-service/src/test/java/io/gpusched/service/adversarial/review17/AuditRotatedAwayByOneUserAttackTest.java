package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Review17: one user erases the audit. {@code <state dir>/audit.log} records "every change and refusal" with who asked
 * (docs/SERVICE.md, Audit); over 64 MiB it is renamed to {@code audit.log.1}, replacing the previous one, so two
 * rotations erase everything before them. A refused job's line carries its {@code argv} (2,048 characters kept, each
 * control character written by JSON as six bytes): about 12 KB of audit per request a local user makes in well under
 * a millisecond of the service's work, and refusals were audited without any per-user bound: 11,000 requests erased
 * the audit of alice's attempt on bob's allocation. Now one uid's refusals are itemized up to a burst, then counted
 * (AuditLog): her flood of 1,200 refusals writes at most a burst of lines, her earlier attempt stays, and the audit,
 * read by its documented format, still accounts for every refusal she made.
 */
@Tag("adversarial")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class AuditRotatedAwayByOneUserAttackTest {

    @Test
    void aUsersFloodOfRefusedRequestsDoesNotEraseTheAuditOfHerEarlierAttempt(@TempDir Path tmp) throws Exception {
        // the audit's lines also go to the log at INFO: 128 MiB of them would flood the test's output
        Logger auditLog = LoggerFactory.getLogger("io.gpusched.service.audit");
        Integer oldLevel = setLevel(auditLog, 30);
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            Answer b = bed.curl(bob, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                    "{\"flags\":[\"--gpu=1\"]}", "http://localhost/api/v1/allocations");
            assertThat(b.status()).as(b.body()).isEqualTo(201);
            String bobs = Clients.JSON.readTree(b.body()).path("id").asText();
            Answer probe = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/" + bobs);
            assertThat(probe.status()).as(probe.body()).isEqualTo(403);
            Path audit = bed.state.resolve("audit.log");
            assertThat(attemptsOn(audit, alice, bobs)).as("the audit of alice's attempt").isOne();

            Map<String, Object> m = new LinkedHashMap<>();
            m.put("flags", List.of("--gpu=1", "--owner=" + bob.name()));
            m.put("argv", List.of("\u0001".repeat(2100)));
            m.put("env", Map.of());
            m.put("cwd", "/");
            m.put("detach", true);
            Path body = tmp.resolve("flood.json");
            Files.writeString(body, Clients.JSON.writeValueAsString(m));
            Files.setPosixFilePermissions(body, PosixFilePermissions.fromString("rw-r--r--"));

            long before = Files.size(audit);
            flood(bed, alice, body, 1, 1);
            long line = Files.size(audit) - before;
            assertThat(line).as("bytes of audit for one refused job").isGreaterThan(10_000);
            long sent = 1 + flood(bed, alice, body, 4, 300);
            long grown = Files.size(audit) - before;
            assertThat(grown).as("bytes of audit after %d refused requests of alice's, %d bytes each itemized", sent,
                    line).isLessThan(150 * line);
            assertThat(attemptsOn(audit, alice, bobs) + attemptsOn(audit.resolveSibling("audit.log.1"), alice, bobs))
                    .as("lines of the audit that record alice's attempt on bob's allocation %s", bobs).isOne();
            bed.close(); // the audit closes with the service: what it counted goes in
            assertThat(ServiceBed.auditedRefusals(audit)).as("refusals in the audit, by uid").containsEntry(alice
                    .uid(), sent + 1); // her flood and her probe
        } finally {
            if (oldLevel != null) {
                setLevel(auditLog, oldLevel);
            }
        }
    }

    /** Runs {@code clients} curls of alice's at once, each posting the body {@code each} times on one connection. */
    private static long flood(ServiceBed bed, LocalUsers.User u, Path body, int clients, int each) throws Exception {
        List<Process> ps = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            ps.add(new ProcessBuilder("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(), "--init-groups", "--",
                    "curl", "-s", "--unix-socket", bed.socket.toString(), "-X", "POST", "-H",
                    "Content-Type: application/json", "--data-binary", "@" + body,
                    "http://localhost/api/v1/jobs?n=[1-" + each + "]").redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start());
        }
        for (Process p : ps) {
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
        return (long) clients * each;
    }

    private static long attemptsOn(Path f, LocalUsers.User u, String id) throws Exception {
        if (!Files.exists(f)) {
            return 0;
        }
        String uid = "\"uid\":" + u.uid() + ",";
        String subject = "\"subject\":\"" + id + "\"";
        try (Stream<String> s = Files.lines(f)) {
            return s.filter(l -> l.contains(uid) && l.contains("\"action\":\"release\"") && l.contains(subject))
                    .count();
        }
    }

    /** Sets an slf4j-simple logger's level (30: WARN) @return the old one, or null where that is not possible. */
    private static Integer setLevel(Logger l, int level) {
        try {
            Field f = l.getClass().getDeclaredField("currentLogLevel");
            f.setAccessible(true);
            int old = f.getInt(l);
            f.setInt(l, level);
            return old;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}
