package io.gpusched.core.adversarial.ledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.zip.CRC32C;

/**
 * What the ledger attack tests share, written from the public API and the documented on-disk format only
 * ({@code <sequence> <crc32c of "<sequence> <json>"> <json>} after one header line): a scheduler on a 4-GPU node
 * description, the test's own bookkeeping of live allocations, and its own parser of the file. Every check is made by
 * the tests' own bookkeeping or parser, never by asking the scheduler whether it was right.
 */
final class LedgerAttacks {

    private LedgerAttacks() {
    }

    static GpuScheduler open(Path dir) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    /** The same node with the given clock. */
    static GpuScheduler open(Path dir, java.time.Clock clock) {
        return GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .clock(clock)
                .maintenanceInterval(Duration.ZERO)
                .build();
    }

    static GpuRequest one() {
        return GpuRequest.builder().count(1).exclusive().build();
    }

    /** id -> device indices of the live allocations. */
    static Map<String, List<Integer>> live(GpuScheduler s) {
        Map<String, List<Integer>> m = new TreeMap<>();
        for (Allocation a : s.allocations()) {
            m.put(a.id(), a.deviceIndices());
        }
        return m;
    }

    /** Our own parser: checks every complete record line's checksum and sequence order; returns the record count. */
    static int checkFile(Path ledger) throws IOException {
        List<String> lines = Files.readAllLines(ledger, StandardCharsets.UTF_8);
        assertTrue(lines.size() >= 1, "a ledger has a header");
        assertTrue(lines.get(0).startsWith("gpusched-ledger "), "header: " + lines.get(0));
        long prev = -1;
        for (int i = 1; i < lines.size(); i++) {
            String l = lines.get(i);
            int a = l.indexOf(' ');
            int b = l.indexOf(' ', a + 1);
            assertTrue(a > 0 && b == a + 9, "line " + (i + 1) + " is not '<seq> <crc> <json>': " + l);
            long seq = Long.parseLong(l.substring(0, a));
            CRC32C c = new CRC32C();
            c.update((l.substring(0, a) + " " + l.substring(b + 1)).getBytes(StandardCharsets.UTF_8));
            assertEquals(String.format("%08x", c.getValue()), l.substring(a + 1, b).toLowerCase(),
                    "checksum of line " + (i + 1) + ": " + l);
            if (prev >= 0) {
                assertEquals(prev + 1, seq, "sequences increase by one at line " + (i + 1));
            }
            prev = seq;
        }
        return lines.size() - 1;
    }

    /** A small ledger: three allocations, the first released. Returns the directory. */
    static Path smallLedger(Path tmp, String name) {
        Path dir = tmp.resolve(name);
        try (GpuScheduler s = open(dir)) {
            String a1 = s.allocate(one()).id();
            s.allocate(GpuRequest.builder().count(1).exclusive().owner("j\u00f6rg-\u65e5\u672c").build());
            s.allocate(GpuRequest.builder().count(1).exclusive().label("city", "Z\u00fcrich \uD83D\uDE80").build());
            assertTrue(s.release(a1));
        }
        return dir;
    }

    static void copyWith(Path srcDir, Path dstDir, byte[] ledger) throws IOException {
        Files.createDirectories(dstDir);
        Files.setPosixFilePermissions(dstDir, PosixFilePermissions.fromString("rwx------"));
        Path f = dstDir.resolve("ledger");
        Files.write(f, ledger);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-------"));
    }
}
