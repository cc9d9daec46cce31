package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Who may write the ledger: files and directories owned by another user, group-writable files, symlinked dirs. */
@Tag("adversarial")
class LedgerOwnershipAttackTest {

    @TempDir
    Path tmp;

    private static GpuScheduler open(Path dir) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    private Path ledgerDir(String name) {
        Path dir = tmp.resolve(name);
        try (GpuScheduler s = open(dir)) {
            s.allocate(GpuRequest.builder().count(1).exclusive().build());
        }
        return dir;
    }

    private static void refused(Path dir, Path named) {
        try (GpuScheduler s = open(dir)) {
            s.allocate(GpuRequest.builder().count(1).exclusive().build());
            fail("a ledger another user may write was used: " + named);
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains(named.toString()), e.getMessage());
        }
    }

    private static void chown(Path p, String uid) throws Exception {
        Process c = new ProcessBuilder("chown", uid, p.toString()).start();
        assumeTrue(c.waitFor() == 0, "chown works (root)");
    }

    @Test
    void aGroupWritableLedgerFileIsRefused() throws Exception {
        Path dir = ledgerDir("gw");
        Files.setPosixFilePermissions(dir.resolve("ledger"), PosixFilePermissions.fromString("rw-rw----"));
        refused(dir, dir.resolve("ledger"));
    }

    @Test
    void aStateDirSymlinkToAWorldWritableDirIsRefused() throws Exception {
        Path real = ledgerDir("real");
        Files.setPosixFilePermissions(real, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path link = tmp.resolve("link");
        Files.createSymbolicLink(link, real);
        refused(link, link);
    }

    @Test
    void aStateDirOwnedByAnotherUserIsRefused() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "root can chown");
        Path dir = ledgerDir("foreign-dir");
        chown(dir, "12345");
        refused(dir, dir);
    }

    @Test
    void aLedgerFileOwnedByAnotherUserIsRefused() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "root can chown");
        Path dir = ledgerDir("foreign-file");
        chown(dir.resolve("ledger"), "12345");
        refused(dir, dir.resolve("ledger"));
    }

}
