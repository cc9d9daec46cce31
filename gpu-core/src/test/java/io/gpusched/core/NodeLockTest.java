package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeLock}'s interrupt rule, observed from the caller: the flag is cleared while the node's lock is held (the
 * ledger's channels are interruptible, and an interrupted write would close them for every thread of the JVM), and
 * an interrupt that arrived meanwhile is the caller's again once the transaction ends, its change written whole.
 */
class NodeLockTest {

    private static DefaultGpuScheduler scheduler(Path dir) {
        return (DefaultGpuScheduler) GpuScheduler.builder().inventory(GpuInventories.simulated("pcie-4xa10"))
                .stateDir(dir).auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void anInterruptDuringTheWriteIsTheCallersAgainAndTheChangeIsWritten(@TempDir Path dir) {
        Instant until = Instant.parse("2030-01-01T00:00:00Z");
        try (DefaultGpuScheduler s = scheduler(dir)) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).exclusive().owner("lock").build());
            // the change interrupts its own thread while it is decided, under the lock: the append that follows meets
            // an interrupted thread, so its channel closes (ClosedByInterruptException) and the write is run again
            Boolean done = s.ledger().commit((state, seq) -> {
                Thread.currentThread().interrupt();
                return Ledger.Decision.of(Boolean.TRUE, new LedgerRecord.Renewed(a.id(), until));
            });
            boolean flag = Thread.interrupted();
            assertThat(done).isTrue();
            assertThat(flag).as("the interrupt that arrived during the transaction is the caller's again").isTrue();
            try (GpuScheduler other = scheduler(dir)) {
                assertThat(other.allocation(a.id()).orElseThrow().expiresAt())
                        .as("another scheduler reads the renewal from the file").isEqualTo(Optional.of(until));
            }
        } finally {
            Thread.interrupted();
        }
    }
}
