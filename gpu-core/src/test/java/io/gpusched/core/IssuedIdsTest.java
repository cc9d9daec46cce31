package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuAllocationException.Reason;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Release of an id the node never issued is {@code UNKNOWN_ALLOCATION}, never a silent "already released": ids with a
 * leading zero, the sequence of a release record, numbers not reached, other prefixes. The test keeps its own record
 * of what {@code allocate} returned (the checker does not ask the scheduler what it issued) and probes every kind of
 * id, in memory, on a node ledger, across compactions and across a second scheduler on the same directory.
 */
class IssuedIdsTest {

    private static GpuScheduler scheduler(Path dir) {
        GpuScheduler.Builder b = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100"))
                .auditLogging(false).maintenanceInterval(Duration.ZERO);
        if (dir != null) {
            b.stateDir(dir);
        }
        return b.build();
    }

    private static String prefixOf(String id) {
        return id.substring(0, id.lastIndexOf('-'));
    }

    @Test
    void aReleaseRecordsSequenceAndALeadingZeroAreUnknown(@TempDir Path dir) {
        try (GpuScheduler s = scheduler(dir)) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).build());
            String p = prefixOf(a.id());
            long n = Long.parseLong(a.id().substring(p.length() + 1));
            assertThat(s.release(a.id())).isTrue();
            String releaseSeq = p + "-" + (n + 1);
            for (String bogus : List.of(p + "-0" + n, releaseSeq, p + "-" + (n + 5), p + "-+" + n, p + "-0",
                    "x" + a.id(), p + "-" + n + " ", p + "-" + Long.MAX_VALUE + "9")) {
                assertThatThrownBy(() -> s.release(bogus)).as(bogus).isInstanceOf(GpuAllocationException.class)
                        .extracting(e -> ((GpuAllocationException) e).reason()).isEqualTo(Reason.UNKNOWN_ALLOCATION);
                assertThatThrownBy(() -> s.renew(bogus, Duration.ofMinutes(1))).as(bogus)
                        .isInstanceOf(GpuAllocationException.class)
                        .extracting(e -> ((GpuAllocationException) e).reason()).isEqualTo(Reason.UNKNOWN_ALLOCATION);
            }
            assertThat(s.release(a.id())).as("a second release of a real id").isFalse();
        }
    }

    @Test
    void inMemorySchedulerKnowsItsIdsToo() {
        try (GpuScheduler s = scheduler(null)) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).build());
            s.release(a.id());
            String p = prefixOf(a.id());
            long n = Long.parseLong(a.id().substring(p.length() + 1));
            assertThatThrownBy(() -> s.release(p + "-" + (n + 1))).isInstanceOf(GpuAllocationException.class);
            assertThat(s.release(a.id())).isFalse();
        }
    }

    /** Random allocate/release/renew with compactions; every id kind probed, in this and a second scheduler. */
    @Test
    void randomHistoryAcrossCompactionsAndProcesses(@TempDir Path dir) {
        String old = System.getProperty("gpusched.ledger.compactBytes");
        System.setProperty("gpusched.ledger.compactBytes", "4096");
        try (GpuScheduler s = scheduler(dir)) {
            Random rnd = new Random(42);
            Set<String> issued = new LinkedHashSet<>();
            Set<String> live = new LinkedHashSet<>();
            String prefix = null;
            long maxSeq = 0;
            for (int i = 0; i < 400; i++) {
                int op = rnd.nextInt(3);
                if (op == 0 || live.isEmpty()) {
                    var a = s.tryAllocate(GpuRequest.builder().count(1 + rnd.nextInt(2)).build());
                    if (a.isPresent()) {
                        issued.add(a.get().id());
                        live.add(a.get().id());
                        prefix = prefixOf(a.get().id());
                    }
                } else if (op == 1) {
                    String id = new ArrayList<>(live).get(rnd.nextInt(live.size()));
                    assertThat(s.release(id)).isTrue();
                    live.remove(id);
                } else {
                    String id = new ArrayList<>(live).get(rnd.nextInt(live.size()));
                    s.renew(id, Duration.ofMinutes(5));
                }
            }
            for (String id : issued) {
                maxSeq = Math.max(maxSeq, Long.parseLong(id.substring(prefix.length() + 1)));
            }
            String header;
            try {
                header = java.nio.file.Files.readAllLines(dir.resolve("ledger")).get(0);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            assertThat(Long.parseLong(header.split(" ")[3])).as("the ledger was compacted: " + header).isGreaterThan(1);
            List<GpuScheduler> both = List.of(s, scheduler(dir));
            try {
                for (GpuScheduler probe : both) {
                    Set<String> stillLive = new HashSet<>(live);
                    for (long n = 1; n <= maxSeq + 3; n++) {
                        String id = prefix + "-" + n;
                        if (stillLive.contains(id)) {
                            continue; // released at the very end
                        }
                        if (issued.contains(id)) {
                            assertThat(probe.release(id)).as("released earlier: " + id).isFalse();
                        } else {
                            assertThatThrownBy(() -> probe.release(id)).as("never an allocation: " + id)
                                    .isInstanceOf(GpuAllocationException.class);
                        }
                    }
                }
                for (String id : live) {
                    assertThat(both.get(1).release(id)).isTrue();
                    assertThat(s.release(id)).isFalse();
                }
            } finally {
                both.get(1).close();
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
    void encodingRoundTripsAndRejectsGarbage() {
        IssuedIds ids = new IssuedIds();
        for (long s = 1; s <= 5000; s++) {
            ids.mark(s, s % 3 == 0);
        }
        IssuedIds back = IssuedIds.decode(ids.encode(5000)).orElseThrow();
        for (long s = 1; s <= 5000; s++) {
            assertThat(back.issued(s, 5000)).isEqualTo(s % 3 == 0);
        }
        assertThat(back.issued(5001, 6000)).isFalse();
        ids.unknownUpTo(10);
        assertThat(IssuedIds.decode(ids.encode(5000)).orElseThrow().issued(4, 5000)).as("below exactFrom").isTrue();
        for (String bad : List.of("", ":", "x:AAAA", "1:!!!", "1:AAAA", "99999999999999999999:eJw=")) {
            assertThat(IssuedIds.decode(bad)).as(bad).isEmpty();
        }
    }
}
