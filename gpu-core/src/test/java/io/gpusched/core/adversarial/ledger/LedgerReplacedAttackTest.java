package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.checkFile;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.live;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of a ledger deleted, or replaced by an older copy, under a running process.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LedgerReplacedAttackTest {

    @TempDir
    Path tmp;

    @Test
    void aLedgerDeletedUnderARunningProcessIsNotForkedSilently() throws Exception {
        Path dir = tmp.resolve("del");
        try (GpuScheduler a = open(dir)) {
            Allocation first = a.allocate(one());
            Files.delete(dir.resolve("ledger"));
            Allocation second = null;
            try {
                second = a.allocate(one());
            } catch (LedgerException e) {
                // refusing is acceptable
            }
            if (second != null) {
                assertTrue(Files.exists(dir.resolve("ledger")), "an acknowledged change is in a file on disk");
                checkFile(dir.resolve("ledger"));
                try (GpuScheduler b = open(dir)) {
                    Map<String, List<Integer>> seenByB = live(b);
                    assertTrue(seenByB.containsKey(second.id()), "another process sees the acknowledged change "
                            + second.id() + ", sees " + seenByB);
                    assertEquals(live(a), seenByB, "both processes agree on the node's allocations");
                    Set<Integer> taken = new HashSet<>();
                    for (List<Integer> d : seenByB.values()) {
                        taken.addAll(d);
                    }
                    for (Allocation x; (x = b.tryAllocate(one()).orElse(null)) != null;) {
                        for (int d : x.deviceIndices()) {
                            assertTrue(taken.add(d), "device " + d + " handed out twice after the delete");
                        }
                    }
                }
            }
            assertNotNull(first);
        }
    }

    @Test
    void aLedgerReplacedByAnOlderCopyIsFollowedNotWrittenBehind() throws Exception {
        Path dir = tmp.resolve("repl");
        try (GpuScheduler a = open(dir)) {
            a.allocate(one());
            Path backup = tmp.resolve("backup");
            Files.copy(dir.resolve("ledger"), backup);
            a.allocate(one());
            Files.move(backup, dir.resolve("ledger"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            Allocation third = a.allocate(one());
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler b = open(dir)) {
                assertTrue(live(b).containsKey(third.id()), "the change acknowledged after the replace is on disk");
                assertEquals(live(a), live(b));
            }
        }
    }
}
