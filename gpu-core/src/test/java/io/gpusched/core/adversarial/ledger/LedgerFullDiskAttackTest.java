package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.checkFile;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.live;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of a full disk and a read-only mount under the state directory (tmpfs; needs root).
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LedgerFullDiskAttackTest {

    @TempDir
    Path tmp;

    private Path mountTmpfs(String name, String opts) throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root to mount a tmpfs");
        Path m = tmp.resolve(name);
        Files.createDirectories(m);
        Process p = new ProcessBuilder("mount", "-t", "tmpfs", "-o", opts, "tmpfs", m.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(p.waitFor() == 0, "mount tmpfs: " + out);
        return m;
    }

    private static void umount(Path m) throws Exception {
        new ProcessBuilder("umount", "-l", m.toString()).start().waitFor();
    }

    @Test
    void aFullDiskFailsChangesCleanlyAndLosesNothing() throws Exception {
        Path m = mountTmpfs("full", "size=96k,mode=0700");
        try {
            Path dir = m.resolve("state");
            Map<String, List<Integer>> acked = new TreeMap<>();
            int noSpace = 0;
            try (GpuScheduler a = open(dir)) {
                // fill the disk but for a few bytes
                Path filler = m.resolve("filler");
                try (var out = Files.newOutputStream(filler)) {
                    byte[] chunk = new byte[512];
                    while (true) {
                        out.write(chunk);
                        out.flush();
                    }
                } catch (IOException full) {
                    // the disk is full
                }
                for (int i = 0; i < 200 && noSpace < 3; i++) {
                    Map<String, List<Integer>> before = live(a);
                    try {
                        if (acked.size() < 4 && (i % 2 == 0 || acked.isEmpty())) {
                            Allocation x = a.allocate(one());
                            acked.put(x.id(), x.deviceIndices());
                        } else {
                            String id = acked.keySet().iterator().next();
                            assertTrue(a.release(id));
                            acked.remove(id);
                        }
                    } catch (LedgerException e) {
                        assertEquals(LedgerException.Kind.NO_SPACE, e.kind(), e.getMessage());
                        noSpace++;
                        assertEquals(before, live(a), "a change that failed on a full disk left the state alone");
                    }
                    assertEquals(acked, live(a));
                }
                assertTrue(noSpace > 0, "the disk filled up");
                try (GpuScheduler b = open(dir)) {
                    assertEquals(acked, live(b), "a second process on the full disk sees what was acknowledged");
                }
                Files.delete(filler);
                Allocation after = null;
                if (acked.size() < 4) {
                    after = a.allocate(one());
                    acked.put(after.id(), after.deviceIndices());
                } else {
                    String id = acked.keySet().iterator().next();
                    assertTrue(a.release(id));
                    acked.remove(id);
                }
            }
            checkFile(dir.resolve("ledger"));
            try (GpuScheduler c = open(dir)) {
                assertEquals(acked, live(c), "after space returns, the ledger is whole and shows every"
                        + " acknowledged change");
            }
        } finally {
            umount(m);
        }
    }

    @Test
    void aReadOnlyStateDirGivesTypedErrors() throws Exception {
        Path m = mountTmpfs("ro", "size=1m,mode=0700");
        try {
            Path dir = m.resolve("state");
            String id;
            try (GpuScheduler a = open(dir)) {
                id = a.allocate(one()).id();
            }
            Process p = new ProcessBuilder("mount", "-o", "remount,ro", m.toString()).start();
            assumeTrue(p.waitFor() == 0, "remount ro");
            try (GpuScheduler b = open(dir)) {
                // reading may work; changing must fail typed
                try {
                    assertEquals(Set.of(id), live(b).keySet());
                    b.allocate(one());
                    fail("allocated on a read-only ledger");
                } catch (LedgerException e) {
                    assertTrue(e.getMessage().contains(m.toString()), e.getMessage());
                }
            } catch (LedgerException e) {
                assertTrue(e.getMessage().contains(m.toString()), e.getMessage());
            }
        } finally {
            umount(m);
        }
    }
}
