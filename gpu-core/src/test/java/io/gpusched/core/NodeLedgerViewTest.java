package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeLedgerView}: the ledger read without its lock and without writing, as a YARN container (another user
 * than the ledger's writer) reads it. The reader-as-another-user case itself runs in gpu-yarn's
 * {@code YarnContainerUserIT} and {@code YarnContainerGpusReadOnlyIT} (setpriv, as nobody).
 */
class NodeLedgerViewTest {

    private static GpuInventory inventory() {
        return GpuInventories.simulated("dgx-h100");
    }

    private static GpuScheduler writer(Path dir) {
        return GpuScheduler.builder().inventory(inventory()).stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    private static Allocation allocate(GpuScheduler s, String job, Integer... gpus) {
        return s.allocate(GpuRequest.builder().deviceIndices(gpus).jobId(job).label("job", job).build());
    }

    /** @return the ids of the live allocations, read by an independent scan of the file's complete lines */
    private static List<String> liveByScan(Path ledger) throws Exception {
        String text = Files.readString(ledger, StandardCharsets.UTF_8);
        java.util.LinkedHashSet<String> live = new java.util.LinkedHashSet<>();
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        for (String line : text.substring(text.indexOf('\n') + 1, text.lastIndexOf('\n') + 1).split("\n")) {
            var n = mapper.readTree(line.substring(line.indexOf(' ', line.indexOf(' ') + 1) + 1));
            switch (n.path("op").asText()) {
                case "A" -> live.add(n.path("id").asText());
                case "R" -> live.remove(n.path("id").asText());
                case "S" -> {
                    live.clear();
                    n.path("live").forEach(x -> live.add(x.path("id").asText()));
                }
                default -> {}
            }
        }
        return List.copyOf(live);
    }

    @Test
    void showsTheLiveAllocationsWithTheirDevicesAndWritesNothing(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Allocation kept;
        try (GpuScheduler s = writer(dir)) {
            kept = allocate(s, "kept", 1, 3);
            s.release(allocate(s, "gone", 0).id());
        }
        Files.delete(dir.resolve(NodeLock.LOCK)); // a reader must not need (nor create) the lock file
        byte[] before = Files.readAllBytes(dir.resolve(LedgerFile.FILE));

        NodeLedgerView v = NodeLedgerView.read(dir, inventory());

        assertThat(v.allocations()).extracting(Allocation::id).containsExactly(kept.id())
                .isEqualTo(liveByScan(dir.resolve(LedgerFile.FILE)));
        assertThat(v.allocations().get(0).deviceIndices()).containsExactly(1, 3);
        assertThat(v.allocations().get(0).deviceUuids()).isEqualTo(kept.deviceUuids());
        assertThat(v.allocations().get(0).request().labels()).containsEntry("job", "kept");
        assertThat(v.sequence()).isEqualTo(3);
        assertThat(v.warnings()).isEmpty();
        assertThat(v.file()).isEqualTo(dir.toAbsolutePath().normalize().resolve(LedgerFile.FILE));
        assertThat(Files.exists(dir.resolve(NodeLock.LOCK))).as("the reader created the lock file").isFalse();
        assertThat(Files.readAllBytes(dir.resolve(LedgerFile.FILE))).isEqualTo(before);
    }

    @Test
    void aTornLastLineIsLeftUnreadAndUncutAndItsCompletionIsReadNextTime(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path ledger = dir.resolve(LedgerFile.FILE);
        Allocation first;
        Allocation second;
        try (GpuScheduler s = writer(dir)) {
            first = allocate(s, "first", 0);
            second = allocate(s, "second", 2); // its record is the last line; cut it in half as a writer mid-append
        }
        byte[] whole = Files.readAllBytes(ledger);
        int lastLine = lastIndexOf(whole, (byte) '\n', whole.length - 2) + 1;
        int half = lastLine + (whole.length - lastLine) / 2;
        Files.write(ledger, Arrays.copyOf(whole, half));

        NodeLedgerView torn = NodeLedgerView.read(dir, inventory());
        assertThat(torn.allocations()).extracting(Allocation::id).containsExactly(first.id());
        assertThat(torn.warnings()).singleElement().asString().contains("incomplete record at offset " + lastLine)
                .contains(ledger.toAbsolutePath().normalize().toString());
        assertThat(Files.size(ledger)).as("a reader cuts nothing: the writer may be appending").isEqualTo(half);

        try (var ch = Files.newOutputStream(ledger, StandardOpenOption.APPEND)) { // the writer finishes its line
            ch.write(whole, half, whole.length - half);
        }
        NodeLedgerView done = NodeLedgerView.read(dir, inventory());
        assertThat(done.allocations()).extracting(Allocation::id).containsExactly(first.id(), second.id())
                .isEqualTo(liveByScan(ledger));
        assertThat(done.warnings()).isEmpty();
    }

    @Test
    void aRecordWrittenMeanwhileByAWriterIsSeenByTheNextRead(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = writer(dir)) {
            Allocation a = allocate(s, "a", 0);
            NodeLedgerView before = NodeLedgerView.read(dir, inventory());
            Allocation b = allocate(s, "b", 4, 5);
            s.release(a.id());
            NodeLedgerView after = NodeLedgerView.read(dir, inventory());
            assertThat(before.allocations()).extracting(Allocation::id).containsExactly(a.id());
            assertThat(after.allocations()).extracting(Allocation::id).containsExactly(b.id());
            assertThat(after.sequence()).isEqualTo(before.sequence() + 2);
            assertThat(s.allocations()).extracting(Allocation::id).containsExactly(b.id());
        }
    }

    @Test
    void aCompactedLedgerIsReadFromItsSnapshot(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        System.setProperty("gpusched.ledger.compactBytes", "1");
        List<String> live;
        try (GpuScheduler s = writer(dir)) {
            for (int i = 0; i < 5; i++) {
                s.release(allocate(s, "churn" + i, i).id());
            }
            allocate(s, "x", 6);
            live = s.allocations().stream().map(Allocation::id).toList();
        } finally {
            System.clearProperty("gpusched.ledger.compactBytes");
        }
        assertThat(NodeLedgerView.read(dir, inventory()).allocations()).extracting(Allocation::id)
                .isEqualTo(live).hasSize(1);
    }

    @Test
    void aDamagedCompleteRecordIsRefusedWithItsOffset(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = writer(dir)) {
            allocate(s, "a", 0);
            allocate(s, "b", 1);
        }
        Path ledger = dir.resolve(LedgerFile.FILE);
        String text = Files.readString(ledger);
        Files.writeString(ledger, text.replace("\"a\"", "\"A\"")); // checksum no longer matches
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.CORRUPT))
                .hasMessageContaining("checksum mismatch").hasMessageContaining("offset");
    }

    @Test
    void aMissingDirectoryOrLedgerIsUnreadableNamingThePath(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("nothing-here");
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.UNREADABLE))
                .hasMessageContaining(dir.toString()).hasMessageContaining("does not exist");
        assertThat(Files.exists(dir)).as("a reader creates nothing").isFalse();
        Files.createDirectory(dir);
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.UNREADABLE))
                .hasMessageContaining(dir.resolve("ledger").toString());
        assertThat(dir).isEmptyDirectory();
    }

    @Test
    void anUnreadableLedgerIsRefusedNamingItAndTheModesThatWork(@TempDir Path tmp) throws Exception {
        assumeFalse(root(), "root reads a file whatever its mode: the other-user case runs as nobody in gpu-yarn's"
                + " YarnContainerGpusReadOnlyIT");
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = writer(dir)) {
            allocate(s, "a", 0);
        }
        Files.setPosixFilePermissions(dir.resolve(LedgerFile.FILE), PosixFilePermissions.fromString("---------"));
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.UNREADABLE))
                .hasMessageContaining(dir.resolve(LedgerFile.FILE).toString()).hasMessageContaining("permission denied")
                .hasMessageContaining("chmod 0644");
    }

    @Test
    void aLedgerOthersMayWriteALinkOrAnotherUsersFileIsNotRead(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = writer(dir)) {
            allocate(s, "a", 0);
        }
        Path ledger = dir.resolve(LedgerFile.FILE);
        Files.setPosixFilePermissions(ledger, PosixFilePermissions.fromString("rw-rw-r--"));
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS))
                .hasMessageContaining("writable by its group");
        Files.setPosixFilePermissions(ledger, PosixFilePermissions.fromString("rw-r--r--"));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS))
                .hasMessageContaining("state directory");
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));

        Path real = tmp.resolve("elsewhere");
        Files.move(ledger, real);
        Files.createSymbolicLink(ledger, real);
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS))
                .hasMessageContaining("symbolic link");
        Files.delete(ledger);
        Files.move(real, ledger);
        assertThat(NodeLedgerView.read(dir, inventory()).allocations()).hasSize(1);

        assumeTrue(root(), "only root can give the ledger to another user than its directory's owner");
        Files.setAttribute(ledger, "unix:uid", 65534);
        assertThatThrownBy(() -> NodeLedgerView.read(dir, inventory())).isInstanceOfSatisfying(LedgerException.class,
                e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.INSECURE_PERMISSIONS))
                .hasMessageContaining("owned by uid 65534");
    }

    @Test
    void aWriterUnderANarrowUmaskStillLeavesTheLedgerReadableByOthers(@TempDir Path tmp) throws Exception {
        Path sh = Path.of("/bin/sh");
        assumeTrue(Files.isExecutable(sh), "needs /bin/sh to start the writer under umask 077");
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
        Path dir = tmp.resolve("base").resolve("simulated").resolve("state");
        Path log = tmp.resolve("child.log");
        // a writer (a NodeManager started with umask 077) creates the state directory and the ledger
        Process p = new ProcessBuilder(sh.toString(), "-c", "umask 077; exec \"$0\" \"$@\"",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
                System.getProperty("java.class.path"), LedgerChild.class.getName(), dir.toString(), "1", "0",
                log.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        for (Path d = dir; !d.equals(tmp); d = d.getParent()) {
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(d))).as(d.toString())
                    .isEqualTo("rwxr-xr-x");
        }
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir.resolve(LedgerFile.FILE))))
                .isEqualTo("rw-r--r--");
        assertThat(NodeLedgerView.read(dir, inventory()).allocations()).isEmpty();
    }

    @Test
    void anotherNodesLedgerIsRefused(@TempDir Path tmp) {
        Path dir = tmp.resolve("state");
        try (GpuScheduler s = writer(dir)) {
            allocate(s, "a", 0);
        }
        assertThatThrownBy(() -> NodeLedgerView.read(dir, GpuInventories.simulated("dgx1-v100")))
                .isInstanceOfSatisfying(LedgerException.class,
                        e -> assertThat(e.kind()).isEqualTo(LedgerException.Kind.NODE_MISMATCH));
    }

    private static boolean root() throws Exception {
        return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
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
