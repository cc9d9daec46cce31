package io.gpusched.core;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.LedgerException.Kind;
import io.gpusched.core.internal.Json;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which node a state directory's ledger describes, kept in {@code <state dir>/node} (JSON: whether the node is
 * simulated, its backend, the UUIDs of its whole GPUs), written by the first process that opens the directory and
 * checked by every later one under the node's lock. A simulated node and a real one never share a ledger, nor do two
 * nodes with no GPU in common; a node that lost or gained a GPU (some UUIDs in common) is the same node.
 *
 * <p>Also finds the ledgers earlier versions of the {@code gpusched} command kept in {@code <state dir>/<backend>/}:
 * this node's is moved into the state directory when the directory has none yet (and a note left where it was), and
 * refused when the directory has one too (two records of one node); other backends' are named in a warning.
 */
final class NodeIdentity {
    private static final Logger LOG = LoggerFactory.getLogger(NodeIdentity.class);
    static final String FILE = "node";
    static final String MOVED_NOTE = "MOVED.txt";

    private NodeIdentity() {
    }

    /**
     * Migrates a legacy ledger and checks (or records) the node, under the node's lock.
     *
     * @param ledger    the opened (not yet loaded) node ledger
     * @param inventory this process's node
     * @return warnings for the scheduler's recovery problems
     * @throws LedgerException {@code NODE_MISMATCH} or {@code LEGACY_LEDGER}
     */
    static List<String> check(NodeLedger ledger, GpuInventory inventory) {
        List<String> warnings = new ArrayList<>();
        ledger.underLock(() -> {
            migrateLegacy(ledger.directory(), inventory.backend(), warnings);
            checkOrRecord(ledger.directory(), inventory);
        });
        return warnings;
    }

    /** @return the directory name the 0.1 CLI gave this backend's ledger */
    static String legacyName(String backend) {
        return backend.replaceAll("[^A-Za-z0-9._-]", "_").toLowerCase(Locale.ROOT);
    }

    private static void migrateLegacy(Path dir, String backend, List<String> warnings) {
        List<Path> legacy = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path sub : ds) {
                String name = sub.getFileName().toString();
                if (name.equals("simulated") || name.equals("waiters")
                        || !Files.isDirectory(sub, LinkOption.NOFOLLOW_LINKS)) {
                    continue;
                }
                Path f = sub.resolve(NodeLedger.FILE);
                if (Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) && startsWithMagic(f)) {
                    legacy.add(sub);
                }
            }
        } catch (IOException e) {
            throw new LedgerException(Kind.IO, dir, "cannot list the state directory " + dir + " to look for ledgers "
                    + "of earlier versions: " + e.getMessage(), e);
        }
        String mine = legacyName(backend);
        Path own = dir.resolve(NodeLedger.FILE);
        for (Path sub : legacy) {
            Path old = sub.resolve(NodeLedger.FILE);
            if (!sub.getFileName().toString().equals(mine)) {
                String w = "ledger of an earlier gpusched for backend \"" + sub.getFileName() + "\" found at " + old
                        + "; it is not this node's (" + backend + ") and is not used: release its allocations with "
                        + "that version, or remove " + sub;
                LOG.warn("{}", w);
                warnings.add(w);
                continue;
            }
            if (Files.exists(own, LinkOption.NOFOLLOW_LINKS)) {
                throw new LedgerException(Kind.LEGACY_LEDGER, old, "two ledgers of this node (" + backend + "): "
                        + own + " and " + old + ", which an earlier gpusched command kept per backend. gpusched now "
                        + "keeps one ledger per node in the state directory itself; allocations in " + old + " would"
                        + " be invisible. Release them with the earlier version (or check that none is live) and "
                        + "remove " + sub + ", then start again", null);
            }
            try {
                NodeLedger.checkNotWritableByOthers(old, "legacy ledger");
                Files.move(old, own, StandardCopyOption.ATOMIC_MOVE);
                fsyncDir(dir);
                Files.writeString(sub.resolve(MOVED_NOTE), "The ledger that was here moved to " + own
                        + " on " + Instant.now() + ": gpusched keeps one ledger per node in the state directory.\n");
            } catch (IOException e) {
                throw new LedgerException(Kind.IO, old, "cannot move this node's earlier ledger " + old + " to "
                        + own + ": " + e.getMessage(), e);
            }
            String w = "moved this node's ledger from " + old + " (an earlier gpusched kept it per backend) to " + own;
            LOG.warn("{}", w);
            warnings.add(w);
        }
    }

    private static boolean startsWithMagic(Path f) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate(NodeLedger.MAGIC.length() + 1);
            while (b.hasRemaining() && ch.read(b) > 0) {
                // read the head
            }
            return new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII)
                    .equals(NodeLedger.MAGIC + " ");
        } catch (IOException e) {
            return false;
        }
    }

    /** @return the UUIDs that identify the node: its whole GPUs, or every device when it lists only partitions */
    static Set<String> gpus(List<GpuDevice> devices) {
        Set<String> whole = new TreeSet<>();
        for (GpuDevice d : devices) {
            whole.add(d.parentUuid().orElse(d.uuid()));
        }
        return whole;
    }

    private static void checkOrRecord(Path dir, GpuInventory inventory) {
        Path f = dir.resolve(FILE);
        boolean simulated = inventory.backend().startsWith(GpuInventories.SIMULATED_PREFIX);
        Set<String> gpus = gpus(inventory.devices());
        if (!Files.exists(f, LinkOption.NOFOLLOW_LINKS)) {
            record(dir, f, inventory.backend(), simulated, gpus);
            return;
        }
        NodeLedger.checkNotWritableByOthers(f, "node identity file");
        JsonNode n;
        try {
            n = Json.MAPPER.readTree(Files.readString(f));
        } catch (IOException | RuntimeException e) {
            throw new LedgerException(Kind.CORRUPT, f, f + " (which node this state directory describes) cannot be"
                    + " read: " + e.getMessage() + "; restore it or remove it (it is written again from this node)", e);
        }
        if (n == null || !n.path("simulated").isBoolean() || !n.path("gpus").isArray()) {
            throw new LedgerException(Kind.CORRUPT, f, f + " does not say which node this state directory describes"
                    + " (expected {\"simulated\": ..., \"backend\": ..., \"gpus\": [...]}); restore it or remove it", null);
        }
        boolean wasSimulated = n.get("simulated").asBoolean();
        String wasBackend = n.path("backend").asText("?");
        Set<String> had = new TreeSet<>();
        n.get("gpus").forEach(x -> had.add(x.asText()));
        String here = describe(inventory.backend(), gpus);
        String there = describe(wasBackend, had);
        if (wasSimulated != simulated) {
            throw new LedgerException(Kind.NODE_MISMATCH, dir, "the state directory " + dir + " holds the ledger of "
                    + (wasSimulated ? "a simulated node" : "a real node") + " (" + there + "); this process's node is "
                    + (simulated ? "simulated" : "real") + " (" + here + "). A simulated node and a real one never "
                    + "share a ledger: give this process another state directory (without one, gpusched keeps a "
                    + "simulated node's ledger in <state dir>/simulated/<profile>)", null);
        }
        boolean common = had.isEmpty() || gpus.isEmpty() || had.stream().anyMatch(gpus::contains);
        if (!common) {
            throw new LedgerException(Kind.NODE_MISMATCH, dir, "the state directory " + dir + " holds the ledger of "
                    + "another node (" + there + "); this process's node (" + here + ") has none of its GPUs. Each "
                    + "node keeps its own state directory; give this process its node's directory, or remove " + f
                    + " and the ledger if that node is gone", null);
        }
        if (!had.equals(gpus)) {
            LOG.info("state directory {} was recorded for {}; this process sees {} (a GPU lost, added or "
                    + "repartitioned): same node", dir, there, here);
        }
    }

    private static String describe(String backend, Set<String> gpus) {
        List<String> first = new ArrayList<>(gpus).subList(0, Math.min(2, gpus.size()));
        return backend + ", " + gpus.size() + " GPU" + (gpus.size() == 1 ? "" : "s")
                + (first.isEmpty() ? "" : " " + String.join(", ", first) + (gpus.size() > 2 ? ", ..." : ""));
    }

    private static void record(Path dir, Path f, String backend, boolean simulated, Set<String> gpus) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", 1);
        m.put("simulated", simulated);
        m.put("backend", backend);
        m.put("gpus", List.copyOf(gpus));
        Path tmp = dir.resolve(FILE + ".tmp");
        try {
            byte[] body = (Json.MAPPER.writeValueAsString(m) + "\n").getBytes(StandardCharsets.UTF_8);
            Files.deleteIfExists(tmp);
            try (FileChannel ch = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(
                    PosixFilePermissions.fromString("rw-r--r--")))) {
                ByteBuffer b = ByteBuffer.wrap(body);
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                ch.force(true);
            }
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE);
            fsyncDir(dir);
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // best effort
            }
            throw new LedgerException(Kind.IO, f, "cannot record which node " + dir + " describes in " + f + ": "
                    + e.getMessage(), e);
        }
    }

    private static void fsyncDir(Path dir) throws IOException {
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }
}
