package io.gpusched.core;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.LedgerException.Kind;
import io.gpusched.core.internal.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
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
    /** The format of the node file this version writes and reads. */
    static final int FORMAT = 1;
    /** A node file larger than this is not a node record (1,024 UUIDs take about 50 KB). */
    static final long MAX_BYTES = 1L << 20;
    /** How much of a ledger without a node record is read to learn which GPUs it names. */
    static final long MAX_LEDGER_SCAN = 64L << 20;

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
    static List<String> check(LedgerFile ledger, GpuInventory inventory) {
        List<String> warnings = new ArrayList<>();
        ledger.underLock(() -> {
            migrateLegacy(ledger.directory(), inventory.backend(), warnings, ledger.group());
            checkOrRecord(ledger.directory(), inventory, true, ledger.group());
        });
        return warnings;
    }

    /**
     * Checks, without the lock and without writing, that {@code dir} describes {@code inventory}'s node: what a reader
     * ({@link NodeLedgerView}) checks. A directory without a node record is checked by the GPUs its ledger names.
     *
     * @throws LedgerException {@code NODE_MISMATCH}, or {@code CORRUPT} for an unreadable node record
     */
    static void verify(Path dir, GpuInventory inventory) {
        checkOrRecord(dir, inventory, false, StateGroup.of(Optional.empty()));
    }

    /** @return the directory name the 0.1 CLI gave this backend's ledger */
    static String legacyName(String backend) {
        return backend.replaceAll("[^A-Za-z0-9._-]", "_").toLowerCase(Locale.ROOT);
    }

    private static void migrateLegacy(Path dir, String backend, List<String> warnings, StateGroup group) {
        List<Path> legacy = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path sub : ds) {
                String name = sub.getFileName().toString();
                if (name.equals("simulated") || name.equals("waiters")
                        || !Files.isDirectory(sub, LinkOption.NOFOLLOW_LINKS)) {
                    continue;
                }
                Path f = sub.resolve(LedgerFile.FILE);
                if (Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) && startsWithMagic(f)) {
                    legacy.add(sub);
                }
            }
        } catch (IOException e) {
            throw new LedgerException(Kind.IO, dir, "cannot list the state directory " + dir + " to look for ledgers "
                    + "of earlier versions: " + e.getMessage(), e);
        }
        String mine = legacyName(backend);
        Path own = dir.resolve(LedgerFile.FILE);
        for (Path sub : legacy) {
            if (!sub.getFileName().toString().equals(mine)) {
                String w = "ledger of an earlier gpusched for backend \"" + sub.getFileName() + "\" found at "
                        + sub.resolve(LedgerFile.FILE) + "; it is not this node's (" + backend + ") and is not used: "
                        + "release its allocations with that version, or remove " + sub;
                LOG.warn("{}", w);
                warnings.add(w);
                continue;
            }
            adopt(sub, own, backend, warnings, group);
        }
        // 0.1's command kept a simulated node's default ledger in <base>/<backend>/, beside the real node's; the
        // default is now <base>/simulated/<profile>/
        Path parent = dir.getParent();
        if (parent != null && parent.getFileName() != null && parent.getFileName().toString().equals("simulated")
                && parent.getParent() != null) {
            Path sibling = parent.getParent().resolve(mine);
            Path f = sibling.resolve(LedgerFile.FILE);
            if (Files.isDirectory(sibling, LinkOption.NOFOLLOW_LINKS)
                    && Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) && startsWithMagic(f)) {
                adopt(sibling, own, backend, warnings, group);
            }
        }
    }

    /** Moves this node's legacy ledger {@code sub/ledger} to {@code own}, or refuses when {@code own} exists. */
    private static void adopt(Path sub, Path own, String backend, List<String> warnings, StateGroup group) {
        Path old = sub.resolve(LedgerFile.FILE);
        if (Files.exists(own, LinkOption.NOFOLLOW_LINKS)) {
            throw new LedgerException(Kind.LEGACY_LEDGER, old, "two ledgers of this node (" + backend + "): "
                    + own + " and " + old + ", which an earlier gpusched command kept per backend. gpusched now "
                    + "keeps one ledger per node in the state directory itself; allocations in " + old + " would"
                    + " be invisible. Release them with the earlier version (or check that none is live) and "
                    + "remove " + sub + ", then start again", null);
        }
        try {
            LedgerDirectorySecurity.checkFile(old, "legacy ledger", group);
            Files.move(old, own, StandardCopyOption.ATOMIC_MOVE);
            fsyncDir(own.getParent());
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

    private static boolean startsWithMagic(Path f) {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            ByteBuffer b = ByteBuffer.allocate(LedgerCodec.MAGIC.length() + 1);
            while (b.hasRemaining() && ch.read(b) > 0) {
                // read the head
            }
            return new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII)
                    .equals(LedgerCodec.MAGIC + " ");
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

    /** @param write whether to record the node (a writer, under the lock) or only compare (a reader) */
    private static void checkOrRecord(Path dir, GpuInventory inventory, boolean write, StateGroup group) {
        Path f = dir.resolve(FILE);
        boolean simulated = inventory.backend().startsWith(GpuInventories.SIMULATED_PREFIX);
        Set<String> gpus = gpus(inventory.devices());
        if (!Files.exists(f, LinkOption.NOFOLLOW_LINKS)) {
            Path ledgerFile = dir.resolve(LedgerFile.FILE);
            // a FIFO or device is the ledger's to refuse
            if (Files.isRegularFile(ledgerFile, LinkOption.NOFOLLOW_LINKS)) {
                checkLedgerWithoutIdentity(dir, ledgerFile, inventory);
            }
            if (write) {
                record(dir, f, inventory.backend(), simulated, gpus, group);
            }
            return;
        }
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
            throw new LedgerException(Kind.CORRUPT, f, f + " (which node this state directory describes) is not a "
                    + "regular file (a link, a directory, a FIFO or a device); remove it (it is written again from this"
                    + " node)", null);
        }
        if (write) {
            LedgerDirectorySecurity.checkFile(f, "node identity file", group);
        } else {
            LedgerDirectorySecurity.checkForReader(f, dir, "node identity file", group);
        }
        JsonNode n;
        try (InputStream in = Files.newInputStream(f, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            byte[] body = in.readNBytes((int) MAX_BYTES + 1);
            if (body.length > MAX_BYTES) {
                throw new LedgerException(Kind.CORRUPT, f, f + " (which node this state directory describes) has "
                        + "more bytes than a node's record can (" + MAX_BYTES + "); restore it or remove it", null);
            }
            n = Json.MAPPER.readTree(new String(body, StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            if (e instanceof LedgerException l) {
                throw l;
            }
            throw new LedgerException(Kind.CORRUPT, f, f + " (which node this state directory describes) cannot be"
                    + " read: " + e.getMessage() + "; restore it or remove it (it is written again from this node)", e);
        }
        if (n != null && n.path("format").isIntegralNumber() && n.get("format").asLong() > FORMAT) {
            throw new LedgerException(Kind.NEWER_FORMAT, f, f + " was written by a newer gpusched (format "
                    + n.get("format").asText() + "; this version reads " + FORMAT + "); use that version", null);
        }
        boolean wellFormed = n != null && n.isObject() && n.path("format").isIntegralNumber()
                && n.get("format").asLong() == FORMAT && n.path("simulated").isBoolean()
                && n.path("backend").isTextual() && n.path("gpus").isArray();
        if (wellFormed) {
            for (JsonNode x : n.get("gpus")) {
                wellFormed &= x.isTextual() && !x.asText().isBlank();
            }
        }
        if (!wellFormed) {
            throw new LedgerException(Kind.CORRUPT, f, f + " does not say which node this state directory describes"
                    + " (expected {\"format\": 1, \"simulated\": true|false, \"backend\": \"...\", \"gpus\":"
                    + " [\"uuid\", ...]}); "
                    + "restore it or remove it (it is written again from this node)", null);
        }
        boolean wasSimulated = n.get("simulated").asBoolean();
        String wasBackend = n.get("backend").asText();
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
        if (write && !had.equals(gpus) && !gpus.isEmpty()) {
            LOG.info("state directory {} was recorded for {}; this process sees {} (a GPU lost, added or "
                    + "repartitioned): same node, recorded as it is now", dir, there, here);
            record(dir, f, inventory.backend(), simulated, gpus, group); // the identity follows the node's GPUs
        }
    }

    /**
     * A ledger without a node record (written before gpusched recorded its node): the UUIDs its records name must
     * include one of this node's devices, else it is another node's.
     */
    private static void checkLedgerWithoutIdentity(Path dir, Path ledgerFile, GpuInventory inventory) {
        Set<String> named = new TreeSet<>();
        try (BufferedReader r = Files.newBufferedReader(ledgerFile, StandardCharsets.UTF_8)) {
            long read = 0;
            for (String line; (line = r.readLine()) != null && read < MAX_LEDGER_SCAN;) {
                read += line.length() + 1;
                int brace = line.indexOf('{');
                if (brace < 0) {
                    continue;
                }
                try {
                    collectUuids(Json.MAPPER.readTree(line.substring(brace)), named, 0);
                } catch (IOException | RuntimeException e) {
                    // a damaged record is the ledger's to report when it is read
                }
            }
        } catch (IOException | RuntimeException e) {
            return; // the ledger's own checks name what is wrong with it
        }
        if (named.isEmpty()) {
            return;
        }
        Set<String> mine = new TreeSet<>();
        for (GpuDevice d : inventory.devices()) {
            mine.add(d.uuid());
            d.parentUuid().ifPresent(mine::add);
        }
        if (named.stream().noneMatch(mine::contains)) {
            List<String> first = new ArrayList<>(named).subList(0, Math.min(2, named.size()));
            throw new LedgerException(Kind.NODE_MISMATCH, dir, "the ledger in " + dir + " (kept without a record of"
                    + " its node, by an earlier gpusched) names GPUs " + String.join(", ", first)
                    + (named.size() > 2 ? ", ..." : "") + ", none of which this process's node ("
                    + describe(inventory.backend(), gpus(inventory.devices())) + ") has: it is another node's. Give "
                    + "this process its own state directory (without one, gpusched keeps a simulated node's ledger in "
                    + "<state dir>/simulated/<profile>)", null);
        }
    }

    private static void collectUuids(JsonNode n, Set<String> into, int depth) {
        if (n == null || depth > 8) {
            return;
        }
        if (n.isObject()) {
            JsonNode devices = n.get("devices");
            if (devices != null && devices.isArray()) {
                devices.forEach(x -> {
                    if (x.isTextual()) {
                        into.add(x.asText());
                    }
                });
            }
            JsonNode device = n.get("device");
            if (device != null && device.isTextual()) {
                into.add(device.asText());
            }
            for (String k : List.of("live", "pools")) {
                JsonNode arr = n.get(k);
                if (arr != null && arr.isArray()) {
                    arr.forEach(x -> collectUuids(x, into, depth + 1));
                }
            }
        }
    }

    private static String describe(String backend, Set<String> gpus) {
        List<String> first = new ArrayList<>(gpus).subList(0, Math.min(2, gpus.size()));
        return backend + ", " + gpus.size() + " GPU" + (gpus.size() == 1 ? "" : "s")
                + (first.isEmpty() ? "" : " " + String.join(", ", first) + (gpus.size() > 2 ? ", ..." : ""));
    }

    private static void record(Path dir, Path f, String backend, boolean simulated, Set<String> gpus,
            StateGroup group) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", FORMAT);
        m.put("simulated", simulated);
        m.put("backend", backend);
        m.put("gpus", List.copyOf(gpus));
        try {
            byte[] body = (Json.MAPPER.writeValueAsString(m) + "\n").getBytes(StandardCharsets.UTF_8);
            LedgerDirectorySecurity.writeAtomically(dir, FILE, body, group); // temp, force, rename, directory force
        } catch (IOException | GpuException e) {
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
