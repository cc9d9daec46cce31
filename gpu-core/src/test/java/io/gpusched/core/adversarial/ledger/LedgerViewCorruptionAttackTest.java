package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.Allocation;
import io.gpusched.core.LedgerException;
import io.gpusched.core.NodeLedgerView;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The read-only view ({@link NodeLedgerView}) of a damaged ledger: one bit flipped at every byte of a small ledger, and
 * the file cut at every length. The view may refuse ({@link LedgerException}), or show exactly what the intact file
 * holds, or (only when something was left unread, which its warnings must say) what a prefix of its records holds;
 * it must never show an allocation the file does not hold, or a GPU in another allocation than the file's. The
 * expected states are computed by the test from views of the intact file's record prefixes, written by the test.
 */
@Tag("adversarial")
class LedgerViewCorruptionAttackTest {

    @TempDir
    Path tmp;

    private static Map<String, String> view(Path dir) {
        NodeLedgerView v = NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10"));
        Map<String, String> m = new TreeMap<>();
        for (Allocation a : v.allocations()) {
            m.put(a.id(), a.deviceUuids().toString());
        }
        return m;
    }

    @Test
    void aFlippedBitOrACutAnywhereIsRefusedOrReadAsAPrefixNeverMisread() throws Exception {
        Path src = LedgerAttacks.smallLedger(tmp, "src");
        byte[] good = Files.readAllBytes(src.resolve("ledger"));
        // the states of every whole-record prefix of the file (header + k complete lines), by the view itself on
        // files the test cut at line ends; the intact file is the last
        java.util.List<Map<String, String>> prefixes = new java.util.ArrayList<>();
        for (int i = 0; i < good.length; i++) {
            if (good[i] == '\n') {
                Path d = tmp.resolve("prefix-" + i);
                LedgerAttacks.copyWith(src, d, Arrays.copyOf(good, i + 1));
                prefixes.add(view(d));
            }
        }
        Map<String, String> whole = prefixes.get(prefixes.size() - 1);
        assertEquals(2, whole.size(), "smallLedger leaves two live allocations");
        Random rnd = new Random(7);
        int refused = 0;
        int prefix = 0;
        for (int pos = 0; pos < good.length; pos++) {
            byte[] bad = good.clone();
            bad[pos] ^= (byte) (1 << rnd.nextInt(8));
            Path d = tmp.resolve("flip-" + pos);
            LedgerAttacks.copyWith(src, d, bad);
            try {
                NodeLedgerView v = NodeLedgerView.read(d, NodeDescriptions.profile("pcie-4xa10"));
                Map<String, String> seen = view(d);
                if (!seen.equals(whole)) {
                    assertTrue(prefixes.contains(seen), "flip at " + pos + ": the view shows " + seen
                            + ", which no prefix of the file holds");
                    assertFalse(v.warnings().isEmpty(), "flip at " + pos + ": a prefix was shown without a warning");
                    prefix++;
                }
            } catch (LedgerException e) {
                refused++;
                assertTrue(e.getMessage().contains(d.toString()), e.getMessage());
            }
            deleteTree(d);
        }
        assertTrue(refused > good.length / 2, "most flips are refused: " + refused + " of " + good.length);
        for (int len = 0; len < good.length; len++) {
            Path d = tmp.resolve("cut-" + len);
            LedgerAttacks.copyWith(src, d, Arrays.copyOf(good, len));
            try {
                Map<String, String> seen = view(d);
                assertTrue(prefixes.contains(seen), "cut at " + len + ": the view shows " + seen);
            } catch (LedgerException e) {
                assertTrue(len < indexOf(good, (byte) '\n') + 1, "cut at " + len + " after the header was refused: "
                        + e.getMessage());
            }
            deleteTree(d);
        }
        System.out.println("view of flipped ledgers: " + refused + " refused, " + prefix + " read as a prefix, of "
                + good.length);
    }

    private static int indexOf(byte[] b, byte x) {
        for (int i = 0; i < b.length; i++) {
            if (b[i] == x) {
                return i;
            }
        }
        return -1;
    }

    private static void deleteTree(Path d) throws Exception {
        try (var s = Files.walk(d)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }

    @Test
    void anEmptyDirectoryOrAnEmptyLedgerIsRefusedNotAnEmptyNode() throws Exception {
        Path d = tmp.resolve("empty");
        LedgerAttacks.copyWith(tmp, d, new byte[0]);
        try {
            view(d);
            fail("an empty ledger file was read as a node with nothing allocated");
        } catch (LedgerException e) {
            assertTrue(e.getMessage().contains(d.resolve("ledger").toString()), e.getMessage());
        }
    }
}
