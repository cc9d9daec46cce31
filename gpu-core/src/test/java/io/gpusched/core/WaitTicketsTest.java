package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The node-wide waiting tickets with injected clocks and liveness; files are checked in the directory itself. */
class WaitTicketsTest {
    static final HolderProcess A = new HolderProcess(1001, 5);
    static final HolderProcess B = new HolderProcess(1002, 7);

    static List<String> files(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir.resolve("waiters"))) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void ticketsAreOrderedDeadOnesAreSkippedAndRemoved(@TempDir Path dir) throws Exception {
        Set<HolderProcess> dead = new HashSet<>();
        AtomicLong now = new AtomicLong(1_000_000);
        WaitTickets a = new WaitTickets(dir, A, now::get, p -> !dead.contains(p));
        WaitTickets b = new WaitTickets(dir, B, now::get, p -> !dead.contains(p));
        WaitTickets.Ticket a1 = a.register(now.get() + 60_000);
        WaitTickets.Ticket b1 = b.register(now.get() + 60_000);
        WaitTickets.Ticket a2 = a.register(now.get() + 60_000);
        assertThat(List.of(a1.number(), b1.number(), a2.number())).isSorted().doesNotHaveDuplicates();
        Files.createFile(dir.resolve("waiters").resolve("not-a-ticket"));
        assertThat(b.live()).extracting(WaitTickets.Ticket::name).containsExactly(a1.name(), b1.name(), a2.name());
        Object before = b.stamp();
        dead.add(A);
        assertThat(b.stamp()).as("a holder's death changes the stamp pollers compare").isNotEqualTo(before);
        assertThat(b.live()).extracting(WaitTickets.Ticket::name).containsExactly(b1.name());
        assertThat(files(dir)).as("dead tickets are deleted, unknown files left alone")
                .containsExactlyInAnyOrder(b1.name(), "not-a-ticket");
        WaitTickets.Ticket b2 = b.register(now.get() + 1);
        assertThat(b2.number()).isGreaterThan(b1.number());
        now.addAndGet(1 + WaitTickets.GRACE_MILLIS + 1);
        WaitTickets c = new WaitTickets(dir, new HolderProcess(1003, 1), now::get, p -> true);
        assertThat(c.live()).as("a ticket long past its deadline is stale").extracting(WaitTickets.Ticket::name)
                .containsExactly(b1.name());
        b.close();
        assertThat(files(dir)).containsExactly("not-a-ticket");
    }

    @Test
    void aNewTicketIsYoungerThanEveryTicketPresentEvenDeadOnes(@TempDir Path dir) throws Exception {
        WaitTickets a = new WaitTickets(dir, A, () -> 0, p -> p.equals(B));
        WaitTickets.Ticket t1 = a.register(Long.MAX_VALUE);
        WaitTickets b = new WaitTickets(dir, B, () -> 0, p -> false);
        WaitTickets.Ticket t2 = b.register(Long.MAX_VALUE);
        assertThat(t2.number()).isGreaterThan(t1.number());
        assertThat(a.live()).as("its own tickets are live to a process").extracting(WaitTickets.Ticket::name)
                .containsExactly(t1.name(), t2.name());
        a.remove(t1);
        assertThat(files(dir)).containsExactly(t2.name());
    }

    @Test
    void aWaitersDirectoryOthersMayWriteIsRefused(@TempDir Path dir) throws Exception {
        Path w = Files.createDirectory(dir.resolve("waiters"));
        Files.setPosixFilePermissions(w, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThatThrownBy(() -> new WaitTickets(dir, A, () -> 0, p -> true)).isInstanceOf(LedgerException.class)
                .hasMessageContaining(w.toString()).hasMessageContaining("rwxrwxrwx");
    }
}
