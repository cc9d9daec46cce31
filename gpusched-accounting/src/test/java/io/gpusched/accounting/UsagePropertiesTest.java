package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;

/**
 * Properties over random scripts (allocations, releases, trace changes and sweeps at random times across UTC
 * midnights): per-day reports add up to the whole period's, a period cut anywhere adds up to the whole, and no
 * allocation holds more GPU-time than wall time times GPUs (released ones: exactly that).
 */
class UsagePropertiesTest {

    /** One step: advance seconds, then what to do (0 sweep, 1 allocate, 2 release, 3 change a trace), a parameter. */
    @Provide
    Arbitrary<List<Tuple.Tuple3<Integer, Integer, Integer>>> scripts() {
        return Arbitraries.integers().between(1, 5400).flatMap(adv -> Arbitraries.integers().between(0, 3)
                .flatMap(op -> Arbitraries.integers().between(0, 1000).map(p -> Tuple.of(adv, op, p))))
                .list().ofMinSize(5).ofMaxSize(60);
    }

    @Property(tries = 40)
    void reportsAddUpAndNeverExceedWallTime(@ForAll("scripts") List<Tuple.Tuple3<Integer, Integer, Integer>> script)
            throws IOException {
        Path dir = Files.createTempDirectory("gpusched-acct-prop");
        Map<String, Allocation> granted = new HashMap<>();
        Map<String, Instant> released = new HashMap<>();
        ScriptedNode node = new ScriptedNode(dir, AccountingSettings.defaults().withCheckpoint(Duration.ofSeconds(
                90)));
        try {
            node.clock.set(Instant.parse("2026-03-02T22:30:00Z"));
            for (int g = 0; g < 4; g++) {
                if (g != 2) {
                    node.trace(g, UsageTrace.of(Duration.ofSeconds(30), 0, 40, 100));
                }
            }
            node.sweep();
            Instant start = node.clock.instant();
            for (var step : script) {
                node.clock.advance(Duration.ofSeconds(step.get1()));
                int p = step.get3();
                switch (step.get2()) {
                    case 1 -> {
                        try {
                            GpuRequest.Builder r = GpuRequest.builder().count(1 + p % 2).owner("u" + p % 3);
                            if (p % 5 == 0) {
                                r.shared(MemorySize.ofGibibytes(4));
                            }
                            Allocation a = node.allocate(r.build());
                            granted.put(a.id(), a);
                        } catch (GpuAllocationException e) {
                            // node full
                        }
                    }
                    case 2 -> {
                        List<Allocation> live = node.scheduler.allocations();
                        if (!live.isEmpty()) {
                            Allocation a = live.get(p % live.size());
                            node.scheduler.release(a.id());
                            released.put(a.id(), node.clock.instant());
                        }
                    }
                    case 3 -> {
                        int g = p % 4;
                        if (g != 2) {
                            node.trace(g, UsageTrace.of(Duration.ofSeconds(1 + p % 60), p % 101, (p * 7) % 101));
                        }
                    }
                    default -> node.sweep();
                }
            }
            node.sweep();
            node.sampler.checkpoint();
            Instant end = node.clock.instant();
            LocalDate firstDay = LocalDate.ofInstant(start, ZoneOffset.UTC);
            LocalDate lastDay = LocalDate.ofInstant(end, ZoneOffset.UTC);
            Instant since = firstDay.atStartOfDay().toInstant(ZoneOffset.UTC);
            Instant until = lastDay.plusDays(1).atStartOfDay().toInstant(ZoneOffset.UTC);
            UsageReport whole = UsageReport.of(node.store, since, until, UsageReport.GroupBy.OWNER);
            UsageReport byDay = UsageReport.of(node.store, since, until, UsageReport.GroupBy.DAY);
            UsageFigures sum = new UsageFigures();
            byDay.rows().forEach(r -> sum.add(r.figures()));
            assertThat(sum.heldMillis()).isEqualTo(whole.total().heldMillis());
            assertThat(sum.idleMillis()).isEqualTo(whole.total().idleMillis());
            assertThat(sum.energyMillijoules()).isEqualTo(whole.total().energyMillijoules());
            assertThat(sum.utilizationPercentMillis()).isCloseTo(whole.total().utilizationPercentMillis(),
                    within(1e-6 * Math.max(1, whole.total().utilizationPercentMillis())));
            assertThat(byDay.rows().stream().mapToLong(UsageReport.Row::allocations).sum())
                    .isEqualTo(whole.allocations()).isEqualTo(granted.size());
            // a period cut anywhere: the two parts add up to the whole (each interval prorated by its overlap)
            Instant mid = start.plus(Duration.between(start, end).dividedBy(3));
            UsageReport left = UsageReport.of(node.store, since, mid, UsageReport.GroupBy.OWNER);
            UsageReport right = UsageReport.of(node.store, mid, until, UsageReport.GroupBy.OWNER);
            long intervals = node.store.days().stream().mapToLong(d -> node.store.day(d).size()).sum();
            assertThat(left.total().heldMillis() + right.total().heldMillis())
                    .isCloseTo(whole.total().heldMillis(), within(intervals));
            for (Allocation a : granted.values()) {
                AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElseThrow();
                long gpus = a.devices().size();
                Instant to = released.getOrDefault(a.id(), end);
                long wall = Duration.between(a.createdAt(), to).toMillis();
                if (released.containsKey(a.id())) {
                    assertThat(u.total().heldMillis()).as("released %s", a.id()).isEqualTo(wall * gpus);
                } else {
                    assertThat(u.total().heldMillis()).as("live %s", a.id()).isLessThanOrEqualTo(wall * gpus);
                }
                assertThat(u.total().measuredMillis()).isLessThanOrEqualTo(u.total().heldMillis());
                assertThat(u.total().idleMillis()).isLessThanOrEqualTo(u.total().utilizationMillis());
            }
        } finally {
            node.close();
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
            }
        }
    }
}
