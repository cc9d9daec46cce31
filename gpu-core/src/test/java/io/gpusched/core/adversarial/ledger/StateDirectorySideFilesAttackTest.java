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
import io.gpusched.core.NodeLedgerView;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The state directory's other files, through the public API: the lock file ({@code ledger.lock}, LedgerFile's
 * Javadoc) and the compaction's new generation ({@code ledger.new}, LedgerCompaction's Javadoc) replaced by a FIFO, and
 * the read-only view ({@link NodeLedgerView}) given a FIFO, a directory, a symlinked directory, a newer format or a
 * state directory that is a FIFO. Each hostile file must be refused with a typed {@link LedgerException} naming it, and
 * nothing may hang: an operation that has not ended after 30 s is failed (and unblocked by opening the FIFO's other
 * end), which is a hang detector, not a timing assertion.
 */
@Tag("adversarial")
class StateDirectorySideFilesAttackTest {

    @TempDir
    Path tmp;

    private static void mkfifo(Path p) throws Exception {
        Process mk = new ProcessBuilder("mkfifo", "-m", "600", p.toString()).start();
        assumeTrue(mk.waitFor() == 0, "mkfifo available");
    }

    /** Runs {@code body} in a daemon thread; a FIFO's blocked open is undone by opening its other end. */
    private static Throwable runUnhung(String what, Path fifo, ThrowingRunnable body) throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                thrown.set(e);
            } finally {
                done.countDown();
            }
        }, "side-file-attack");
        t.setDaemon(true);
        t.start();
        if (!done.await(30, TimeUnit.SECONDS)) {
            String where = stack(t);
            Path unrelated = fifo.getParent().resolveSibling("unrelated-" + System.nanoTime());
            String others = otherDirectoryWhileBlocked(unrelated);
            unblock(fifo);
            done.await(30, TimeUnit.SECONDS);
            fail(what + " hangs (still blocked after 30 s in " + where + "; meanwhile a scheduler on an unrelated"
                    + " state directory of this JVM " + others + ")");
        }
        return thrown.get();
    }

    /** @return whether a scheduler on another, healthy state directory opens and allocates within 10 s */
    private static String otherDirectoryWhileBlocked(Path other) throws InterruptedException {
        CountDownLatch ok = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            try (GpuScheduler s = open(other)) {
                s.allocate(one());
                ok.countDown();
            } catch (Throwable e) {
                // reported as not opened
            }
        }, "unrelated-directory");
        t.setDaemon(true);
        t.start();
        return ok.await(10, TimeUnit.SECONDS) ? "opened and allocated" : "was blocked too (" + stack(t) + ")";
    }

    private static String stack(Thread t) {
        StringBuilder sb = new StringBuilder();
        StackTraceElement[] st = t.getStackTrace();
        for (int i = 0; i < st.length; i++) {
            if (i == 0 || st[i].getClassName().startsWith("io.gpusched.core.")
                    && !st[i].getClassName().contains(".adversarial.")) {
                sb.append(st[i].getClassName().replace("io.gpusched.core.", "")).append('.')
                        .append(st[i].getMethodName()).append(':').append(st[i].getLineNumber()).append(" <- ");
            }
        }
        return sb.toString();
    }

    /** Opens both ends of the FIFO briefly (non-blocking for us: read-write), so a blocked open returns. */
    private static void unblock(Path fifo) {
        Thread u = new Thread(() -> {
            try (var c = java.nio.channels.FileChannel.open(fifo, java.nio.file.StandardOpenOption.READ,
                    java.nio.file.StandardOpenOption.WRITE)) {
                Thread.sleep(2000);
            } catch (Exception ignored) {
                // best effort
            }
        });
        u.setDaemon(true);
        u.start();
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void aFifoInPlaceOfTheLockFileIsRefusedWithoutHangingTheJvmsOtherSchedulers() throws Exception {
        Path dir = smallLedger(tmp, "fifo-lock");
        Files.delete(dir.resolve("ledger.lock"));
        mkfifo(dir.resolve("ledger.lock"));
        Throwable e = runUnhung("opening a state directory whose ledger.lock is a FIFO", dir.resolve("ledger.lock"),
                () -> {
                    try (GpuScheduler s = open(dir)) {
                        s.allocate(one());
                    }
                });
        assertTrue(e instanceof LedgerException, "typed refusal, was " + e);
        assertTrue(e.getMessage().contains(dir.resolve("ledger.lock").toString()), e.getMessage());
    }

    @Test
    void aFifoInPlaceOfTheCompactionsNewFileDoesNotHangTheNode() throws Exception {
        Path dir = tmp.resolve("fifo-new");
        // a scheduler that compacts after every change (the documented threshold property, read when it opens)
        String before = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "1");
        try {
            try (GpuScheduler s = open(dir)) {
                s.release(s.allocate(one()).id());
            }
            assertTrue(Files.exists(dir.resolve("ledger")));
            mkfifo(dir.resolve("ledger.new"));
            Throwable e = runUnhung("a change that compacts while ledger.new is a FIFO", dir.resolve("ledger.new"),
                    () -> {
                        try (GpuScheduler s = open(dir)) {
                            String id = s.allocate(one()).id();
                            // the change was forced before compaction: another scheduler must see it
                            assertTrue(s.release(id));
                        }
                    });
            // a failed compaction is a warning and the change stands (LedgerFile: "it keeps growing")
            assertEquals(null, e, "the change itself succeeds; compaction failing is only logged");
        } finally {
            if (before == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", before);
            }
        }
    }

    @Test
    void theViewRefusesAFifoInPlaceOfTheLedgerWithoutHanging() throws Exception {
        Path dir = tmp.resolve("view-fifo");
        Files.createDirectories(dir);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        mkfifo(dir.resolve("ledger"));
        Throwable e = runUnhung("NodeLedgerView.read of a FIFO", dir.resolve("ledger"),
                () -> NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10")));
        assertTrue(e instanceof LedgerException, "typed refusal, was " + e);
        assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, ((LedgerException) e).kind(), e.getMessage());
        assertTrue(e.getMessage().contains(dir.resolve("ledger").toString()), e.getMessage());
    }

    @Test
    void theViewRefusesADirectoryInPlaceOfTheLedgerAndAStateDirThatIsAFifo() throws Exception {
        Path dir = tmp.resolve("view-dir");
        Files.createDirectories(dir.resolve("ledger"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
        try {
            NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10"));
            fail("a directory was read as the ledger");
        } catch (LedgerException e) {
            assertTrue(e.getMessage().contains(dir.resolve("ledger").toString()), e.getMessage());
        }
        Path fifoDir = tmp.resolve("state-fifo");
        mkfifo(fifoDir);
        Throwable e = runUnhung("NodeLedgerView.read of a FIFO as the state directory", fifoDir,
                () -> NodeLedgerView.read(fifoDir, NodeDescriptions.profile("pcie-4xa10")));
        assertTrue(e instanceof LedgerException, "typed refusal, was " + e);
        assertEquals(LedgerException.Kind.UNREADABLE, ((LedgerException) e).kind(), e.getMessage());
        assertTrue(e.getMessage().contains(fifoDir.toString()), e.getMessage());
    }

    @Test
    void theViewOfASymlinkedStateDirIsTheSameAsTheDirectorysAndASymlinkToAWorldWritableOneIsRefused()
            throws Exception {
        Path real = smallLedger(tmp, "real");
        Files.setPosixFilePermissions(real, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        NodeLedgerView direct = NodeLedgerView.read(real, NodeDescriptions.profile("pcie-4xa10"));
        NodeLedgerView through = NodeLedgerView.read(link, NodeDescriptions.profile("pcie-4xa10"));
        assertEquals(2, direct.allocations().size(), "smallLedger leaves two live allocations");
        assertEquals(direct.sequence(), through.sequence());
        assertEquals(direct.allocations().stream().map(a -> a.id() + a.deviceIndices()).toList(),
                through.allocations().stream().map(a -> a.id() + a.deviceIndices()).toList());

        Path open = tmp.resolve("open");
        Files.createDirectories(open);
        Files.copy(real.resolve("ledger"), open.resolve("ledger"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path link2 = Files.createSymbolicLink(tmp.resolve("link2"), open);
        try {
            NodeLedgerView.read(link2, NodeDescriptions.profile("pcie-4xa10"));
            fail("a ledger in a directory any user may write was read through a link");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
        }
    }

    @Test
    void theViewRefusesANewerFormatAndALedgerSymlinkedToASafeFile() throws Exception {
        Path src = smallLedger(tmp, "src");
        Files.setPosixFilePermissions(src, PosixFilePermissions.fromString("rwxr-xr-x"));
        String text = Files.readString(src.resolve("ledger"), StandardCharsets.UTF_8);
        String header = text.substring(0, text.indexOf('\n'));
        String[] h = header.split(" ");
        h[1] = Integer.toString(Integer.parseInt(h[1]) + 1);
        String body = String.join(" ", java.util.Arrays.copyOf(h, h.length - 1));
        java.util.zip.CRC32C c = new java.util.zip.CRC32C();
        c.update(body.getBytes(StandardCharsets.UTF_8));
        String forged = body + " " + String.format("%08x", c.getValue()) + text.substring(text.indexOf('\n'));
        Path newer = tmp.resolve("newer");
        LedgerAttacks.copyWith(src, newer, forged.getBytes(StandardCharsets.UTF_8));
        try {
            NodeLedgerView.read(newer, NodeDescriptions.profile("pcie-4xa10"));
            fail("a newer format was read");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.NEWER_FORMAT, e.kind(), e.getMessage());
        }
        // a link to a file that is safe in itself: the view does not follow links (NodeLedgerView's Javadoc)
        Path linked = tmp.resolve("linked");
        LedgerAttacks.copyWith(src, linked, Files.readAllBytes(src.resolve("ledger")));
        Path target = tmp.resolve("target-ledger");
        Files.move(linked.resolve("ledger"), target);
        Files.createSymbolicLink(linked.resolve("ledger"), target);
        try {
            NodeLedgerView.read(linked, NodeDescriptions.profile("pcie-4xa10"));
            fail("the view followed a symbolic link");
        } catch (LedgerException e) {
            assertEquals(LedgerException.Kind.INSECURE_PERMISSIONS, e.kind(), e.getMessage());
            assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
        }
    }
}
