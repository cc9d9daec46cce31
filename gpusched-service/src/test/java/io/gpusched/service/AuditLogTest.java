package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.server.Caller;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The audit file after the service closed. */
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
}
