package io.gpusched.core.adversarial.onenode;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.core.LedgerException.Kind;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Consumer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Node identity as the README promises it: the ledger records its node; another node (simulated vs real, no GPU in
 * common) is refused with {@code NODE_MISMATCH}; a node that lost or gained a GPU is the same node and its
 * allocations stay on the same physical GPUs (by UUID, whatever the enumeration order); a damaged or hostile
 * {@code node} file is refused with a {@link LedgerException} naming it, never a hang, an out-of-memory or another
 * exception type.
 */
@Tag("adversarial")
class NodeIdentityAttackTest {

    private static Set<String> uuids(List<Allocation> as) {
        Set<String> s = new HashSet<>();
        as.forEach(a -> s.addAll(a.deviceUuids()));
        return s;
    }

    /** Takes every free GPU one at a time and returns their UUIDs (the node must not hand out a held one). */
    private static List<String> takeAllFree(GpuScheduler s) {
        List<String> got = new ArrayList<>();
        while (true) {
            var a = s.tryAllocate(GpuRequest.builder().count(1).build());
            if (a.isEmpty()) {
                return got;
            }
            got.addAll(a.get().deviceUuids());
        }
    }

    @Test
    void theSameGpusEnumeratedInAnotherOrderKeepTheirAllocationsOnTheSamePhysicalGpus(@TempDir Path dir) {
        Set<String> held;
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            held = new HashSet<>(s.allocate(GpuRequest.builder().count(3).build()).deviceUuids());
        }
        try (GpuScheduler s = Nodes.open(Nodes.reindexed("dgx1-v100", 7, 6, 5, 4, 3, 2, 1, 0), dir)) {
            assertThat(uuids(s.allocations())).as("the allocation is on the GPUs it was granted").isEqualTo(held);
            List<String> free = takeAllFree(s);
            assertThat(free).as("GPUs granted after reordering").hasSize(5).doesNotContainAnyElementsOf(held);
        }
    }

    @Test
    void aGpuThatDisappearsShiftsNoAllocationOntoAnotherGpu(@TempDir Path dir) {
        Set<String> held;
        String gone = GpuInventories.simulated("dgx1-v100").devices().get(0).uuid();
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(1).requiredDevices(0).build());
            held = new HashSet<>(s.allocate(GpuRequest.builder().count(2).requiredDevices(4).build()).deviceUuids());
        }
        // GPU 0 fell off the bus: the others are enumerated 0..6 now (the README: "the same node")
        try (GpuScheduler s = Nodes.open(Nodes.reindexed("dgx1-v100", 1, 2, 3, 4, 5, 6, 7), dir)) {
            assertThat(uuids(s.allocations())).as("live allocations' GPUs").containsAll(held);
            List<String> free = takeAllFree(s);
            assertThat(free).as("GPUs granted on the shrunk node").doesNotContainAnyElementsOf(held)
                    .doesNotContain(gone).hasSize(5);
        }
    }

    @Test
    void aPartlyOverlappingNodeNeverGrantsAGpuHeldOnTheLedger(@TempDir Path dir) {
        Set<String> held;
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            held = new HashSet<>(s.allocate(GpuRequest.builder().count(4).requiredDevices(0, 1, 2, 3).build())
                    .deviceUuids());
        }
        // four GPUs in common (4..7), four new ones enumerated first
        GpuInventory partly = Nodes.mixed("dgx1-v100", "new", 4, 4, 5, 6, 7);
        try (GpuScheduler s = Nodes.open(partly, dir)) {
            List<String> free = takeAllFree(s);
            assertThat(free).doesNotContainAnyElementsOf(held).hasSize(8);
        } catch (LedgerException e) {
            assertThat(e.kind()).as("refusing is fine too: " + e.getMessage()).isEqualTo(Kind.NODE_MISMATCH);
        }
    }

    /**
     * A ledger gpusched 0.1's library kept for a real node (no node file then) with live allocations on GPUs the
     * simulated node does not have: a {@code --simulate} process on that directory must not adopt it, or the ledger
     * becomes "simulated" and the real node is locked out of its own allocations.
     */
    @Test
    void aRealNodesLedgerWithoutANodeFileIsNotAdoptedByASimulatedNode(@TempDir Path dir) throws Exception {
        GpuInventory realNode = Nodes.real(Nodes.mixed("dgx1-v100", "elsewhere", 8), "nvml");
        try (GpuScheduler s = Nodes.open(realNode, dir)) {
            s.allocate(GpuRequest.builder().count(8).build());
        }
        Files.delete(dir.resolve("node")); // as 0.1 left it
        String adopted = null;
        try (GpuScheduler sim = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            adopted = "the simulated node opened it, seeing " + sim.allocations().size() + " allocations";
        } catch (LedgerException e) {
            assertThat(e.kind()).isEqualTo(Kind.NODE_MISMATCH);
        }
        GpuInventory realAgain = Nodes.real(Nodes.mixed("dgx1-v100", "elsewhere", 8), "nvml");
        try (GpuScheduler s = Nodes.open(realAgain, dir)) {
            assertThat(s.allocations()).hasSize(1);
        } catch (LedgerException e) {
            throw new AssertionError(adopted + "; now the real node is refused its own ledger: " + e.getMessage(), e);
        }
        assertThat(adopted).as("a simulated node adopting a real node's ledger").isNull();
    }

    // ---- hostile node files ----

    private static Path freshNode(Path dir) {
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        return dir.resolve("node");
    }

    private static void refused(Path dir, Consumer<LedgerException> check) {
        assertTimeoutPreemptively(Duration.ofSeconds(20), () -> {
            try {
                Nodes.open(GpuInventories.simulated("dgx1-v100"), dir).close();
                throw new AssertionError("opened a node whose node file is hostile");
            } catch (LedgerException e) {
                check.accept(e);
            } catch (AssertionError e) {
                throw e;
            } catch (Throwable e) { // an OutOfMemoryError must not take the test JVM down with it
                throw new AssertionError("not a LedgerException: " + e, e);
            }
        });
    }

    private static void namesNodeFile(LedgerException e, Path node) {
        assertThat(e.getMessage() + " " + e.path()).contains(node.toString());
    }

    @Test
    void aNodeFileThatIsNotJsonOrHasWrongTypesIsRefusedAsCorrupt(@TempDir Path tmp) throws Exception {
        String[] bodies = {"", "\0\0\0", "null", "[]", "42", "{\"gpus\":\"GPU-x\",\"simulated\":true,\"format\":1}",
            "{\"gpus\":[null],\"simulated\":true,\"format\":1,\"backend\":\"simulated:dgx1-v100\"}",
            "{\"gpus\":[1,2],\"simulated\":\"yes\",\"format\":1,\"backend\":7}",
            "{\"format\":1}", "{\"format\":\"1\",\"gpus\":[],\"simulated\":true}",
            "[".repeat(200_000), "{\"a\":".repeat(100_000)};
        List<String> opened = new ArrayList<>();
        int i = 0;
        for (String body : bodies) {
            Path dir = tmp.resolve("d" + i++);
            Path node = freshNode(dir);
            Files.writeString(node, body, StandardCharsets.ISO_8859_1);
            try {
                refused(dir, e -> {
                    assertThat(e.kind()).as("body %.40s", body)
                            .isIn(Kind.CORRUPT, Kind.NODE_MISMATCH, Kind.NEWER_FORMAT);
                    namesNodeFile(e, node);
                });
            } catch (AssertionError e) {
                opened.add(String.format("%.60s: %s", body, e.getMessage().lines().findFirst().orElse("")));
            }
        }
        assertThat(opened).as("node files that were not refused with a LedgerException naming them").isEmpty();
    }

    @Test
    void aNodeFileThatIsAFifoDoesNotHangTheOpen(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        Files.delete(node);
        assertThat(new ProcessBuilder("mkfifo", node.toString()).start().waitFor()).isZero();
        try {
            refused(dir, e -> namesNodeFile(e, node));
        } finally { // a reader blocked on the FIFO gets end-of-file, so no thread stays stuck
            Thread writer = new Thread(() -> {
                try (var w = Files.newOutputStream(node)) {
                    w.flush();
                } catch (Exception ignored) {
                    // nobody was reading
                }
            });
            writer.setDaemon(true);
            writer.start();
            writer.join(2000);
        }
    }

    @Test
    void aNodeFileLinkedToDevZeroIsRefusedNotReadForever(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        Files.delete(node);
        Files.createSymbolicLink(node, Path.of("/dev/zero"));
        refused(dir, e -> namesNodeFile(e, node));
    }

    @Test
    void aHugeSparseNodeFileIsRefusedWithoutReadingItIntoMemory(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        String good = Files.readString(node);
        try (RandomAccessFile f = new RandomAccessFile(node.toFile(), "rw")) {
            f.setLength(8L << 30); // 8 GiB of zeros after valid JSON, no disk used
            f.seek(0);
            f.write(good.getBytes(StandardCharsets.UTF_8));
        }
        refused(dir, e -> namesNodeFile(e, node));
    }

    @Test
    void aWorldWritableNodeFileIsRefusedLikeAWorldWritableLedger(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        Files.setPosixFilePermissions(node, PosixFilePermissions.fromString("rw-rw-rw-"));
        refused(dir, e -> {
            assertThat(e.kind()).isEqualTo(Kind.INSECURE_PERMISSIONS);
            namesNodeFile(e, node);
        });
    }

    @Test
    void aNodeFileSymlinkedToAFileOthersMayWriteIsRefused(@TempDir Path tmp) throws Exception {
        Path dir = tmp.resolve("state");
        Path node = freshNode(dir);
        Path planted = tmp.resolve("planted-node");
        Files.copy(node, planted);
        Files.setPosixFilePermissions(planted, PosixFilePermissions.fromString("rw-rw-rw-"));
        Files.delete(node);
        Files.createSymbolicLink(node, planted);
        refused(dir, e -> assertThat(e.kind()).isIn(Kind.INSECURE_PERMISSIONS, Kind.CORRUPT));
    }

    @Test
    void aNodeFileThatIsADirectoryIsRefusedNamingIt(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        Files.delete(node);
        Files.createDirectory(node);
        refused(dir, e -> namesNodeFile(e, node));
    }

    @Test
    void aNodeFileOfANewerFormatIsRefused(@TempDir Path dir) throws Exception {
        Path node = freshNode(dir);
        Files.writeString(node, Files.readString(node).replace("\"format\":1", "\"format\":99"));
        refused(dir, e -> namesNodeFile(e, node));
    }

    /** A real node with the UUIDs of the simulated one is still another node; the same node under two names too. */
    @Test
    void aRealBackendNamedLikeASimulatedOneIsStillReal(@TempDir Path dir) {
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            s.allocate(GpuRequest.builder().count(1).build());
        }
        for (String backend : new String[]{"simulated", "Simulated:dgx1-v100", "simulated-dgx1-v100", "nvml"}) {
            GpuInventory real = Nodes.real(GpuInventories.simulated("dgx1-v100"), backend);
            assertThatThrownBy(() -> Nodes.open(real, dir).close()).as(backend)
                    .isInstanceOfSatisfying(LedgerException.class,
                            e -> assertThat(e.kind()).isEqualTo(Kind.NODE_MISMATCH));
        }
    }

    /**
     * GPUs replaced one at a time (each step "a node that lost or gained a GPU is the same node") never make the node
     * a stranger to its own ledger: the identity follows the GPUs the node has.
     */
    @Test
    void aNodeWhoseGpusAreReplacedOneAtATimeStaysTheSameNode(@TempDir Path dir) {
        try (GpuScheduler s = Nodes.open(Nodes.reindexed("dgx1-v100", 0, 1, 2, 3), dir)) {
            s.allocate(GpuRequest.builder().count(1).requiredDevices(0).build());
        }
        int[][] steps = {{4, 1, 2, 3}, {4, 5, 2, 3}, {4, 5, 6, 3}, {4, 5, 6, 7}};
        for (int[] step : steps) {
            try (GpuScheduler s = Nodes.open(Nodes.reindexed("dgx1-v100", step), dir)) {
                assertThat(s.inventory().devices()).hasSize(4);
            } catch (LedgerException e) {
                throw new AssertionError("step " + java.util.Arrays.toString(step) + " (one GPU swapped since the"
                        + " last open) refused: " + e.getMessage(), e);
            }
        }
    }
}
