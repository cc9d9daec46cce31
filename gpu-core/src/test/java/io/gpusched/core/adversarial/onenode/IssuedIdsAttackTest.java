package io.gpusched.core.adversarial.onenode;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * "release(id) returns true once, false for a second release, and throws UNKNOWN_ALLOCATION for an id the node never
 * issued as an allocation: another prefix, a number with a leading zero, a number not reached, or the sequence of a
 * release or other record; the node remembers which sequences were allocations across compactions." Checked in
 * memory, on a ledger, after many compactions, from a fresh scheduler and from a second process, for release and
 * renew, with ids built by the test from what the node really issued (it keeps its own list).
 */
@Tag("adversarial")
class IssuedIdsAttackTest {

    /** What the test saw the node do: ids issued (allocations), in the order issued, and which it released. */
    private record History(String prefix, List<String> issued, Set<String> released, List<Long> seqs) {
    }

    private static String prefix(String id) {
        return id.substring(0, id.lastIndexOf('-'));
    }

    private static long seq(String id) {
        return Long.parseLong(id.substring(id.lastIndexOf('-') + 1));
    }

    /** Allocates and releases in a pattern that leaves gaps (release records) between allocation sequences. */
    private static History churn(GpuScheduler s, int rounds) {
        List<String> issued = new ArrayList<>();
        Set<String> released = new LinkedHashSet<>();
        List<Long> seqs = new ArrayList<>();
        Allocation keep = s.allocate(GpuRequest.builder().count(1).build());
        issued.add(keep.id());
        for (int i = 0; i < rounds; i++) {
            Allocation a = s.allocate(GpuRequest.builder().count(1 + i % 2).build());
            issued.add(a.id());
            if (i % 5 != 4) {
                assertThat(s.release(a.id())).as("first release of %s", a.id()).isTrue();
                released.add(a.id());
            } else {
                s.renew(a.id(), Duration.ofHours(1));
                // keep it; the next rounds allocate around it
                if (s.allocations().size() > 3) {
                    Allocation old = s.allocations().get(1);
                    assertThat(s.release(old.id())).isTrue();
                    released.add(old.id());
                }
            }
        }
        issued.forEach(id -> seqs.add(seq(id)));
        return new History(prefix(keep.id()), issued, released, seqs);
    }

    /** Ids the node never issued as allocations, built from its real ids. */
    private static List<String> neverIssued(History h) {
        Set<Long> alloc = new java.util.HashSet<>(h.seqs());
        long max = h.seqs().stream().mapToLong(Long::longValue).max().orElseThrow();
        String p = h.prefix();
        List<String> ids = new ArrayList<>();
        long first = h.seqs().get(0);
        for (long n = 0; n <= max + 3; n++) {
            if (!alloc.contains(n)) {
                ids.add(p + "-" + n); // a release/renew record's sequence, zero, or a number not reached
            }
        }
        ids.addAll(List.of(p + "-0" + first, p + "-00" + first, p + "-+" + first, p + "--" + first,
                p + "-" + first + " ", " " + p + "-" + first, p + "-" + first + "\n", p + "-" + first + "\0",
                p + "-\u0661", p + "-\uff11", p + "-" + first + "\u0660", p + "-\u0967",
                p.toUpperCase() + "-" + first, p + "x-" + first, "x" + p + "-" + first, "P-" + first,
                p + "-" + first + ".0", p + "-" + first + "e0", p + "-0x" + Long.toHexString(first),
                p + "-" + Long.MAX_VALUE, p + "-" + Long.MIN_VALUE, p + "-9223372036854775808",
                p + "-99999999999999999999999999999999", p + "-" + (1L << 31), p + "-" + Integer.MAX_VALUE,
                p + "-", p, "-" + first, "", " ", p + "-" + first + "-" + first, p + "_" + first,
                p + "-" + first + "/../" + first, p + "—" + first));
        return ids;
    }

    /** @return one line per id that was not refused with UNKNOWN_ALLOCATION by release or by renew */
    private static List<String> notRefused(GpuScheduler s, List<String> ids) {
        List<String> wrong = new ArrayList<>();
        for (String id : ids) {
            for (String op : List.of("release", "renew")) {
                try {
                    Object r = op.equals("release") ? s.release(id) : s.renew(id, Duration.ofMinutes(5));
                    wrong.add(op + "(" + quote(id) + ") returned " + r);
                } catch (GpuAllocationException e) {
                    if (e.reason() != GpuAllocationException.Reason.UNKNOWN_ALLOCATION) {
                        wrong.add(op + "(" + quote(id) + ") threw " + e.reason() + ": " + e.getMessage());
                    }
                } catch (RuntimeException e) {
                    wrong.add(op + "(" + quote(id) + ") threw " + e);
                }
            }
        }
        return wrong;
    }

    private static String quote(String id) {
        StringBuilder b = new StringBuilder("\"");
        id.codePoints().forEach(c -> b.append(c < 0x20 || c > 0x7e ? String.format("\\u%04x", c)
                : String.valueOf((char) c)));
        return b.append('"').toString();
    }

    /** A second release of every id the node really issued and that was released is false, never an exception. */
    private static List<String> secondReleases(GpuScheduler s, History h) {
        List<String> wrong = new ArrayList<>();
        for (String id : h.released()) {
            try {
                if (s.release(id)) {
                    wrong.add("second release(" + id + ") returned true");
                }
            } catch (RuntimeException e) {
                wrong.add("second release(" + id + ") threw " + e);
            }
        }
        return wrong;
    }

    @Test
    void inMemoryNeverIssuedIdsAreUnknownAndSecondReleasesAreFalse() {
        try (GpuScheduler s = Nodes.inMemory(GpuInventories.simulated("dgx1-v100"))) {
            History h = churn(s, 40);
            int live = s.allocations().size();
            assertThat(notRefused(s, neverIssued(h))).isEmpty();
            assertThat(secondReleases(s, h)).isEmpty();
            assertThat(s.allocations()).as("nothing changed").hasSize(live);
        }
    }

    @Test
    void onALedgerNeverIssuedIdsAreUnknownAndSecondReleasesAreFalse(@TempDir Path dir) {
        History h;
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            h = churn(s, 40);
            assertThat(notRefused(s, neverIssued(h))).isEmpty();
            assertThat(secondReleases(s, h)).isEmpty();
        }
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            assertThat(notRefused(s, neverIssued(h))).as("reopened").isEmpty();
            assertThat(secondReleases(s, h)).as("reopened").isEmpty();
        }
    }

    @Test
    void afterManyCompactionsTheNodeStillKnowsWhichSequencesWereAllocations(@TempDir Path dir) throws Exception {
        String old = System.setProperty("gpusched.ledger.compactBytes", "1500");
        try {
            History h;
            try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
                h = churn(s, 300);
                assertThat(notRefused(s, neverIssued(h))).isEmpty();
                assertThat(secondReleases(s, h)).isEmpty();
            }
            assertThat(Files.size(dir.resolve("ledger"))).as("compacted").isLessThan(30_000);
            try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
                assertThat(notRefused(s, neverIssued(h))).as("reopened after compaction").isEmpty();
                assertThat(secondReleases(s, h)).as("reopened after compaction").isEmpty();
                // the live ones are still releasable once
                for (Allocation a : s.allocations()) {
                    assertThat(s.release(a.id())).isTrue();
                    assertThat(s.release(a.id())).isFalse();
                }
            }
        } finally {
            if (old == null) {
                System.clearProperty("gpusched.ledger.compactBytes");
            } else {
                System.setProperty("gpusched.ledger.compactBytes", old);
            }
        }
    }

    @Test
    void aSecondProcessRefusesTheSameIdsAndReleasesARealOneOnce(@TempDir Path dir) throws Exception {
        History h;
        String live;
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            h = churn(s, 60);
            live = s.allocate(GpuRequest.builder().count(1).build()).id();
        }
        List<String> ids = new ArrayList<>(neverIssued(h));
        ids.removeIf(id -> id.contains("\n") || id.contains("\0")); // one id per line to the child
        ids.remove(live); // "a number not reached" by the churn is the live allocation's id now
        Process p = Nodes.child(List.of("-Dgpusched.ledger.compactBytes=2000"), IdChild.class, dir.toString());
        List<String> answers = new ArrayList<>();
        try (PrintWriter w = new PrintWriter(p.getOutputStream(), true, StandardCharsets.UTF_8);
             BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String id : ids) {
                w.println("release " + id);
                answers.add("release(" + quote(id) + ") " + r.readLine());
                w.println("renew " + id);
                answers.add("renew(" + quote(id) + ") " + r.readLine());
            }
            for (String id : h.released()) {
                w.println("release " + id);
                String a = r.readLine();
                if (!"false".equals(a)) {
                    answers.add("second release(" + id + ") " + a);
                }
            }
            w.println("release " + live);
            assertThat(r.readLine()).as("first release of a live id from the second process").isEqualTo("true");
            w.println("release " + live);
            assertThat(r.readLine()).as("second release of it").isEqualTo("false");
        }
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        answers.removeIf(a -> a.endsWith(" UNKNOWN_ALLOCATION"));
        assertThat(answers).as("answers of the second process that are not UNKNOWN_ALLOCATION").isEmpty();
        try (GpuScheduler s = Nodes.open(GpuInventories.simulated("dgx1-v100"), dir)) {
            assertThat(s.allocation(live)).isEmpty();
        }
    }
}
