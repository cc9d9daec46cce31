package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.checkFile;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.copyWith;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.live;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.smallLedger;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of the node ledger's record format: a torn tail of every length is cut and the next append
 * leaves a valid ledger; a flipped byte anywhere is never misread.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LedgerCorruptionAttackTest {

    @TempDir
    Path tmp;

    @Test
    void aTornTailOfEveryLengthIsCutAndTheNextAppendLeavesAValidLedger() throws Exception {
        Path src = smallLedger(tmp, "src");
        byte[] full = Files.readAllBytes(src.resolve("ledger"));
        int headerEnd = indexOf(full, (byte) '\n', 0) + 1;
        Map<String, List<Integer>> expectedFull;
        try (GpuScheduler s = open(src)) {
            expectedFull = live(s);
        }
        assertEquals(2, expectedFull.size());
        for (int len = 0; len < headerEnd; len++) {
            Path dir = tmp.resolve("torn-header-" + len);
            copyWith(src, dir, java.util.Arrays.copyOf(full, len));
            try (GpuScheduler s = open(dir)) {
                assertEquals(Map.of(), live(s), "a torn header holds no allocation, len " + len);
                s.release(s.allocate(one()).id());
            } catch (LedgerException e) {
                assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
            }
        }
        Map<String, List<Integer>> atBoundary = null;
        for (int len = headerEnd; len <= full.length; len++) {
            Path dir = tmp.resolve("torn-" + len);
            byte[] cut = java.util.Arrays.copyOf(full, len);
            copyWith(src, dir, cut);
            boolean boundary = full[len - 1] == '\n';
            Map<String, List<Integer>> seen;
            String newId;
            try (GpuScheduler s = open(dir)) {
                seen = live(s);
                if (boundary) {
                    atBoundary = seen;
                } else {
                    assertEquals(atBoundary, seen, "a torn tail of " + (len) + " bytes shows what the last whole"
                            + " record showed");
                    assertFalse(s.recoveryProblems().isEmpty(), "the cut is reported at length " + len);
                }
                // the next change must land on a clean line
                Allocation extra = s.tryAllocate(one()).orElse(null);
                newId = extra == null ? null : extra.id();
            }
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler s = open(dir)) {
                Map<String, List<Integer>> again = live(s);
                if (newId != null) {
                    assertTrue(again.containsKey(newId), "the allocation made after the cut survives, len " + len);
                    again.remove(newId);
                }
                assertEquals(seen, again, "reopen after cut + append, len " + len);
            }
        }
        assertEquals(expectedFull, atBoundary);
    }

    // ---------------------------------------------------------------------------------------------------------------
    // a flipped byte in every position

    @Test
    void aFlippedByteAnywhereIsNeverMisread() throws Exception {
        Path src = smallLedger(tmp, "src");
        byte[] full = Files.readAllBytes(src.resolve("ledger"));
        Map<String, List<Integer>> expected;
        try (GpuScheduler s = open(src)) {
            expected = live(s);
        }
        int lastLineStart = lastIndexOf(full, (byte) '\n', full.length - 2) + 1;
        Map<String, List<Integer>> beforeLast;
        Path pre = tmp.resolve("pre");
        copyWith(src, pre, java.util.Arrays.copyOf(full, lastLineStart));
        try (GpuScheduler s = open(pre)) {
            beforeLast = live(s);
        }
        List<String> problems = new ArrayList<>();
        for (int p = 0; p < full.length; p++) {
            byte[] bad = full.clone();
            bad[p] ^= 0x01;
            Path dir = tmp.resolve("flip-" + p);
            copyWith(src, dir, bad);
            try (GpuScheduler s = open(dir)) {
                Map<String, List<Integer>> seen = live(s);
                boolean ok = seen.equals(expected) || (p >= lastLineStart && seen.equals(beforeLast));
                if (!ok) {
                    problems.add("flip at " + p + " ('" + (char) full[p] + "') misread: " + seen);
                }
            } catch (LedgerException e) {
                if (p >= headerEnd(full) && e.kind() != LedgerException.Kind.CORRUPT) {
                    problems.add("flip at " + p + ": kind " + e.kind() + ": " + e.getMessage());
                }
                if (!e.getMessage().contains(dir.toString())) {
                    problems.add("flip at " + p + ": message does not name the file: " + e.getMessage());
                }
            } catch (RuntimeException e) {
                problems.add("flip at " + p + " ('" + (char) full[p] + "'): " + e);
            }
        }
        assertEquals(List.of(), problems);
    }

    private static int headerEnd(byte[] b) {
        return indexOf(b, (byte) '\n', 0) + 1;
    }

    private static int indexOf(byte[] b, byte x, int from) {
        for (int i = from; i < b.length; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }

    private static int lastIndexOf(byte[] b, byte x, int from) {
        for (int i = from; i >= 0; i--) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }
}
