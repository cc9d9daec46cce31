package io.gpusched.core.adversarial.durability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.LedgerException;
import io.gpusched.core.NodeLedgerView;
import io.gpusched.core.sim.NodeDescriptions;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A full disk while the ledger compacts after every change ({@code gpusched.ledger.compactBytes=1}): the state
 * directory on a 64 KiB tmpfs, then the rest of the tmpfs filled, so writing {@code ledger.new} fails while appends
 * may still fit in the ledger's last page, until they fail too (the pages a compaction's rename frees are taken
 * by filler files after each change). A reader ({@link NodeLedgerView}) checks each step; another scheduler the end.
 * Every change either returns (the test's model takes it) or fails with {@code NO_SPACE} (the model stays); after each,
 * the test's own parser of the file (header, CRC'd lines, A/R/S records) must show exactly the model's allocations,
 * with no GPU twice and no {@code ledger.new} left behind. Space given back, compaction resumes and nothing is lost.
 * Needs root (mount).
 */
@Tag("adversarial")
class CompactionOnAFullDiskAttackTest {

    @TempDir
    Path tmp;

    private static GpuScheduler open(Path dir) {
        return GpuScheduler.builder().inventory(NodeDescriptions.profile("pcie-4xa10")).stateDir(dir)
                .maintenanceInterval(Duration.ZERO).build();
    }

    /** The test's own reading of the file: live id -> GPU UUIDs, and the header's generation. */
    private static Map<String, List<String>> liveInFile(Path file, long[] generation) throws IOException {
        String text = Files.readString(file, StandardCharsets.UTF_8);
        assertTrue(text.endsWith("\n"), "no torn tail after a failed append: the change was cut back");
        String[] lines = text.split("\n");
        String[] h = lines[0].split(" ");
        assertEquals("gpusched-ledger", h[0]);
        generation[0] = Long.parseLong(h[3]);
        Map<String, List<String>> live = new TreeMap<>();
        long prev = -1;
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        for (int i = 1; i < lines.length; i++) {
            String[] f = lines[i].split(" ", 3);
            CRC32C c = new CRC32C();
            c.update((f[0] + " " + f[2]).getBytes(StandardCharsets.UTF_8));
            assertEquals(String.format("%08x", c.getValue()), f[1], "crc of line " + (i + 1));
            long seq = Long.parseLong(f[0]);
            assertTrue(prev < 0 || seq == prev + 1, "sequence order at line " + (i + 1));
            prev = seq;
            var n = json.readTree(f[2]);
            switch (n.path("op").asText()) {
                case "A" -> live.put(n.get("id").asText(), uuids(n));
                case "S" -> n.get("live").forEach(x -> live.put(x.get("id").asText(), uuids(x)));
                case "R" -> assertTrue(live.remove(n.get("id").asText()) != null, "released a non-live id");
                default -> {}
            }
        }
        return live;
    }

    private static List<String> uuids(com.fasterxml.jackson.databind.JsonNode n) {
        List<String> u = new ArrayList<>();
        n.get("devices").forEach(d -> u.add(d.asText()));
        return u;
    }

    /** Takes every free page of the tmpfs with filler files (one page each). */
    private static void grab(Path m, List<Path> fillers) {
        while (true) {
            Path f = m.resolve("filler-" + fillers.size());
            fillers.add(f);
            try (OutputStream o = Files.newOutputStream(f)) {
                o.write(1);
            } catch (IOException e) {
                return;
            }
        }
    }

    @Test
    void aFullDiskDuringCompactionLosesNothingAndCompactionResumesWhenThereIsSpace() throws Exception {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root to mount a tmpfs");
        Path m = tmp.resolve("small");
        Files.createDirectories(m);
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", m.toString())
                .redirectErrorStream(true).start();
        String out = new String(mount.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assumeTrue(mount.waitFor() == 0, "mount tmpfs: " + out);
        String before = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "1");
        try {
            Path dir = m.resolve("state");
            Path file = dir.resolve("ledger");
            Map<String, List<String>> model = new TreeMap<>();
            long[] gen = {0};
            Random rnd = new Random(5);
            int noSpace = 0;
            int okWhileFull = 0;
            int stuck = 0;
            try (GpuScheduler a = open(dir)) {
                for (int i = 0; i < 3; i++) {
                    Allocation x = a.allocate(GpuRequest.builder().count(1).exclusive().build());
                    model.put(x.id(), x.deviceUuids());
                }
                long genBefore;
                liveInFile(file, gen);
                genBefore = gen[0];
                assertTrue(genBefore > 1, "compacts after each change: generation " + genBefore);
                // fill the tmpfs to the last page, and again after every step (a compaction's rename frees the old
                // file's pages, which the next compaction would otherwise use)
                List<Path> fillers = new ArrayList<>();
                grab(m, fillers);
                long lastGen = genBefore;
                for (int step = 0; step < 600 && noSpace < 6; step++) {
                    GpuScheduler s = a;
                    boolean changed = false;
                    grab(m, fillers); // a page the last compaction's rename freed is taken
                    try {
                        if (model.size() < 4 && (model.isEmpty() || rnd.nextBoolean())) {
                            Allocation x = s.allocate(GpuRequest.builder().count(1).exclusive()
                                    .owner("step-" + step).build());
                            model.put(x.id(), x.deviceUuids());
                        } else {
                            String id = new ArrayList<>(model.keySet()).get(rnd.nextInt(model.size()));
                            assertTrue(s.release(id), "release of live " + id);
                            model.remove(id);
                        }
                        okWhileFull++;
                        changed = true;
                    } catch (LedgerException e) {
                        assertEquals(LedgerException.Kind.NO_SPACE, e.kind(), e.getMessage());
                        noSpace++;
                    }
                    assertEquals(model, liveInFile(file, gen),
                            "step " + step + ": the file holds what was acknowledged");
                    assertFalse(Files.exists(dir.resolve("ledger.new")), "a failed compaction left ledger.new");
                    if (changed && gen[0] == lastGen) {
                        stuck++; // the change stands, its compaction failed for want of space
                    }
                    lastGen = gen[0];
                    Map<String, List<String>> seen = new TreeMap<>();
                    for (Allocation x : NodeLedgerView.read(dir, NodeDescriptions.profile("pcie-4xa10"))
                            .allocations()) {
                        seen.put(x.id(), x.deviceUuids());
                    }
                    assertEquals(model, seen, "step " + step + ": a reader sees the same allocations");
                }
                System.out.println("while full: " + okWhileFull + " changes made, " + noSpace + " NO_SPACE, " + stuck
                        + " not compacted, generation " + genBefore + " -> " + gen[0] + ", file " + Files.size(file)
                        + " bytes, fillers " + fillers.size());
                assertTrue(noSpace > 0, "the disk became full for appends too");
                assertTrue(stuck > 0, "compaction failed for want of space at least once");
                for (Path f : fillers) {
                    Files.deleteIfExists(f);
                }
                // space again: a change of another scheduler succeeds and compacts
                Allocation x;
                try (GpuScheduler b = open(dir)) {
                    if (model.size() == 4) {
                        String first = model.keySet().iterator().next();
                        assertTrue(b.release(first), "another scheduler releases " + first);
                        model.remove(first);
                    }
                    x = b.allocate(GpuRequest.builder().count(1).build());
                }
                model.put(x.id(), x.deviceUuids());
                assertEquals(model, liveInFile(file, gen));
                assertTrue(gen[0] > lastGen, "compaction resumed: generation " + gen[0] + " after " + lastGen);
            }
            try (GpuScheduler c = open(dir)) {
                Map<String, List<String>> seen = new TreeMap<>();
                for (Allocation x : c.allocations()) {
                    seen.put(x.id(), x.deviceUuids());
                }
                assertEquals(model, seen, "a fresh scheduler after the full disk");
            }
        } finally {
            if (before == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", before);
            }
            new ProcessBuilder("umount", "-l", m.toString()).start().waitFor();
        }
    }
}
