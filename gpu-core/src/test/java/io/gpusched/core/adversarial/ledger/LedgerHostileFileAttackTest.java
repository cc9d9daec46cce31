package io.gpusched.core.adversarial.ledger;

import static io.gpusched.core.adversarial.ledger.LedgerAttacks.one;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.open;
import static io.gpusched.core.adversarial.ledger.LedgerAttacks.smallLedger;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Adversarial tests of the state directory and its files: a FIFO or a directory in place of the ledger, a
 * symlink to a world-writable file, a world-writable lock file, a group-writable state directory, a newer format.
 * Written from the public API and the documented on-disk format only; see {@link LedgerAttacks}.
 */
@Tag("adversarial")
class LedgerHostileFileAttackTest {

    @TempDir
    Path tmp;

    @Test
    void aFifoInPlaceOfTheLedgerIsRefusedWithoutHanging() throws Exception {
        Path dir = tmp.resolve("fifo");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        Process mk = new ProcessBuilder("mkfifo", "-m", "600", dir.resolve("ledger").toString()).start();
        assumeTrue(mk.waitFor() == 0, "mkfifo available");
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try (GpuScheduler s = open(dir)) {
                s.allocate(one());
            } catch (Throwable e) {
                thrown.set(e);
            } finally {
                done.countDown();
            }
        });
        t.setDaemon(true);
        t.start();
        if (!done.await(30, TimeUnit.SECONDS)) {
            // unblock the reader so the thread can end, then fail
            try (var w = Files.newOutputStream(dir.resolve("ledger"))) {
                w.write('\n');
            } catch (IOException ignored) {
                // nothing
            }
            fail("opening a FIFO as the ledger hangs");
        }
        assertTrue(thrown.get() instanceof LedgerException, "typed refusal, was " + thrown.get());
        assertTrue(thrown.get().getMessage().contains("ledger"), thrown.get().getMessage());
    }

    @Test
    void aDirectoryInPlaceOfTheLedgerIsATypedError() throws Exception {
        Path dir = tmp.resolve("d");
        Files.createDirectories(dir.resolve("ledger"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
        try (GpuScheduler s = open(dir)) {
            s.allocate(one());
            fail("a directory as ledger was used");
        } catch (LedgerException e) {
            assertTrue(e.getMessage().contains(dir.resolve("ledger").toString()), e.getMessage());
        }
    }

    @Test
    void aLedgerSymlinkToAWorldWritableFileIsRefused() throws Exception {
        Path src = smallLedger(tmp, "src");
        Path target = tmp.resolve("elsewhere");
        Files.copy(src.resolve("ledger"), target);
        Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rw-rw-rw-"));
        Files.delete(src.resolve("ledger"));
        Files.createSymbolicLink(src.resolve("ledger"), target);
        try (GpuScheduler s = open(src)) {
            s.allocate(one());
            fail("a ledger any user may write was trusted");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
        }
    }

    @Test
    void aWorldWritableLockFileIsRefused() throws Exception {
        Path src = smallLedger(tmp, "src");
        Path lock = src.resolve("ledger.lock");
        assertTrue(Files.exists(lock), "opening a ledger creates its lock file " + lock + " (LedgerFile's Javadoc)");
        Files.setPosixFilePermissions(lock, PosixFilePermissions.fromString("rw-rw-rw-"));
        try (GpuScheduler s = open(src)) {
            s.allocate(one());
            fail("a lock file any user may write was trusted");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
        }
    }

    @Test
    void aGroupWritableStateDirIsRefusedNamingPathAndMode() throws Exception {
        Path dir = tmp.resolve("g");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwx---"));
        try (GpuScheduler s = open(dir)) {
            s.allocate(one());
            fail("group-writable state dir used");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind());
            assertTrue(e.getMessage().contains(dir.toString()), e.getMessage());
            assertTrue(e.getMessage().contains("770") || e.getMessage().contains("rwxrwx---"), e.getMessage());
        }
    }

    @Test
    void aNewerFormatIsRefusedNotMisread() throws Exception {
        Path src = smallLedger(tmp, "src");
        String text = Files.readString(src.resolve("ledger"));
        String header = text.substring(0, text.indexOf('\n'));
        String[] h = header.split(" ");
        // the documented header: "gpusched-ledger <format> ... <crc32c of everything before it>"; forge format 2
        String body = header.substring(0, header.lastIndexOf(' '));
        CRC32C c = new CRC32C();
        c.update(body.getBytes(StandardCharsets.UTF_8));
        assertEquals(String.format("%08x", c.getValue()), h[h.length - 1], "the header's last field is the crc32c"
                + " of the fields before it, as LedgerCodec's Javadoc says: " + header);
        h[1] = "2";
        String body2 = String.join(" ", java.util.Arrays.copyOf(h, h.length - 1));
        c.reset();
        c.update(body2.getBytes(StandardCharsets.UTF_8));
        String forged = body2 + " " + String.format("%08x", c.getValue()) + text.substring(text.indexOf('\n'));
        Files.writeString(src.resolve("ledger"), forged);
        try (GpuScheduler s = open(src)) {
            s.allocations();
            fail("a newer format was read");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.NEWER_FORMAT, e.kind(), e.getMessage());
        }
        assertEquals(forged, Files.readString(src.resolve("ledger")), "a refused ledger is left alone");
    }
}
