package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.server.Caller;
import io.gpusched.testing.ManualClock;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The audit file after the service closed, and under a flood of one user's refusals. */
class AuditLogTest {

    @Test
    void aLineRecordedAfterCloseNeverReopensTheFile(@TempDir Path tmp) throws Exception {
        Path file = tmp.resolve("audit.log");
        AuditLog audit = new AuditLog(file, Clock.systemUTC());
        Caller alice = new Caller(5001, 5001, "alice", List.of("alice"), false);
        audit.record(alice, "allocate", "a1", "--gpu=1", "ok", null);
        assertThat(Files.readString(file)).contains("\"action\":\"allocate\"");
        audit.close();
        // a successor service's state directory: the file is gone (or another's) and must stay as it is
        Files.delete(file);
        audit.record(alice, "allocate.dropped", "a2", "--gpu=1", "SERVICE_CLOSED", "the service closed");
        assertThat(file).doesNotExist();
        assertThat(tmp).isEmptyDirectory();
    }

    @Test
    void aFloodOfOneUsersRefusalsIsCountedNotItemizedAndNoRefusalIsLost(@TempDir Path tmp) throws Exception {
        Path file = tmp.resolve("audit.log");
        ManualClock clock = new ManualClock();
        AuditLog audit = new AuditLog(file, clock);
        Caller alice = new Caller(5001, 5001, "alice", List.of("alice"), false);
        Caller bob = new Caller(5002, 5002, "bob", List.of("bob"), false);
        audit.record(bob, "release", "a7", null, "FORBIDDEN", "owned by carol");
        for (int i = 0; i < 5000; i++) {
            audit.record(alice, "job.start", null, "x".repeat(2000), "FORBIDDEN", "only an admin may name an owner");
        }
        long bytes = Files.size(file);
        assertThat(bytes).as("a flood of 5,000 refusals of 2 KB each").isLessThan(
                (AuditLog.REFUSAL_BURST + 2) * 2300L);
        audit.record(bob, "release", "a8", null, "FORBIDDEN", "owned by carol"); // bob's own budget
        assertThat(ServiceBed.auditedRefusals(file)).containsEntry(bob.uid(), 2L);
        clock.advance(Duration.ofSeconds(10)); // 10 more itemized, her count of 4,900 before the first of them
        for (int i = 0; i < 20; i++) {
            audit.record(alice, "job.start", "j" + i, null, "FORBIDDEN", "only an admin may name an owner");
        }
        List<String> lines = Files.readAllLines(file);
        assertThat(lines.get(lines.size() - 11)).contains("\"action\":\"audit.suppressed\"")
                .contains("4900 refusals of uid 5001").endsWith(": job.start FORBIDDEN 4900\"}");
        assertThat(lines.get(lines.size() - 1)).contains("\"subject\":\"j9\"");
        audit.record(alice, "allocate", "a9", "--gpu=1", "ok", null); // her 10 counted refusals go before it
        lines = Files.readAllLines(file);
        assertThat(lines.get(lines.size() - 2)).contains("\"action\":\"audit.suppressed\"")
                .endsWith(": job.start FORBIDDEN 10 (first on j10)\"}");
        assertThat(lines.get(lines.size() - 1)).contains("\"subject\":\"a9\"");
        assertThat(ServiceBed.auditedRefusals(file)).containsEntry(alice.uid(), 5020L).containsEntry(bob.uid(), 2L);

        for (int i = 0; i < 7; i++) { // counted after the burst is spent again (none refilled: the clock stands)
            audit.record(alice, "job.start", null, null, "FORBIDDEN", "x");
        }
        audit.record(alice, "release", "a77", null, "FORBIDDEN", "owned by bob"); // her probe, within the flood
        clock.advance(Duration.ofMinutes(2));
        audit.record(bob, "allocate", "a10", "--gpu=1", "ok", null); // a minute on: any line writes the count
        assertThat(ServiceBed.auditedRefusals(file)).containsEntry(alice.uid(), 5028L);
        lines = Files.readAllLines(file);
        assertThat(lines.get(lines.size() - 1)).as("her count, after bob's line").contains("audit.suppressed")
                .contains("release FORBIDDEN 1 (first on a77)");
        for (int i = 0; i < 200; i++) {
            audit.record(alice, "job.start", null, null, "FORBIDDEN", "x");
        }
        audit.close(); // what was counted and not written yet goes in at close
        assertThat(ServiceBed.auditedRefusals(file)).containsEntry(alice.uid(), 5228L).containsEntry(bob.uid(), 2L);
    }

    @Test
    void harmlessRefusalsCannotSpendTheBudgetThatKeepsAnAttemptOnAnotherUsersThingsItemized(@TempDir Path tmp)
            throws Exception {
        Path file = tmp.resolve("audit.log");
        ManualClock clock = new ManualClock();
        AuditLog audit = new AuditLog(file, clock);
        Caller alice = new Caller(5001, 5001, "alice", List.of("alice"), false);
        for (int i = 0; i < 150; i++) { // ids that do not exist: 100 itemized, 50 counted
            audit.record(alice, "release", "nothing-" + i, null, "UNKNOWN_ALLOCATION", "no such allocation");
        }
        audit.record(alice, "release", "a1-7", null, "FORBIDDEN", "held by bob; bob or an admin may release it");
        List<String> lines = Files.readAllLines(file);
        assertThat(lines.get(lines.size() - 1)).as("her attempt on bob's allocation, itemized after her flood")
                .contains("\"subject\":\"a1-7\"").contains("\"result\":\"FORBIDDEN\"");
        assertThat(lines.get(lines.size() - 2)).contains("audit.suppressed")
                .contains("release UNKNOWN_ALLOCATION 50 (first on nothing-100)");
        assertThat(ServiceBed.auditedRefusals(file)).containsEntry(alice.uid(), 151L);
        audit.close();
    }
}
