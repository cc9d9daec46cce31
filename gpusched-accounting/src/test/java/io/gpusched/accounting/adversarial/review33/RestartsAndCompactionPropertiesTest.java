package io.gpusched.accounting.adversarial.review33;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AllocationUsage;
import io.gpusched.accounting.UsageFigures;
import io.gpusched.accounting.UsageReport;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.sim.UsageTrace;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The promised properties (issue 34; docs/ACCOUNTING.md) under what UsagePropertiesTest does not script: planned
 * restarts of the sampler (allocations granted while none ran), clock jumps forward that stay (gaps), sweeps at
 * irregular times across UTC midnights, and compaction of the older days (summaries with {@code parts}). Per-day
 * reports (each day asked on its own) add up to the whole period's; the report by owner and by allocation agree; an
 * allocation released while a sampler ran holds exactly wall time x GPUs; nothing is counted twice.
 */
@Tag("adversarial")
class RestartsAndCompactionPropertiesTest {

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void reportsAddUpAcrossRestartsJumpsAndCompaction() throws IOException {
        List<String> failures = new ArrayList<>();
        for (int seed = 1; seed <= 25 && failures.isEmpty(); seed++) {
            failures.addAll(run(seed));
        }
        assertThat(failures).as("violated properties (first failing seed)").isEmpty();
    }

    private static List<String> run(long seed) throws IOException {
        Random rnd = new Random(seed);
        Path dir = Files.createTempDirectory("review33-prop");
        List<String> bad = new ArrayList<>();
        Map<String, Allocation> granted = new HashMap<>();
        Map<String, Instant> released = new HashMap<>();
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofSeconds(60)))) {
            node.clock.set(Instant.parse("2026-03-02T21:00:00Z").plusSeconds(rnd.nextInt(3600)));
            for (int g = 0; g < 3; g++) {
                node.inventory.setTrace(g, UsageTrace.of(Duration.ofSeconds(20 + 10 * g), 0, 55, 100));
            }
            node.sweep();
            Instant start = node.clock.instant();
            boolean running = true;
            for (int step = 0; step < 160; step++) {
                int kind = rnd.nextInt(100);
                if (kind < 55) {
                    node.clock.advance(Duration.ofMillis(200 + rnd.nextInt(90_000)));
                    if (running) {
                        node.sweep();
                    }
                } else if (kind < 70) {
                    try {
                        GpuRequest.Builder r = GpuRequest.builder().count(1 + rnd.nextInt(2)).owner("u"
                                + rnd.nextInt(3));
                        Allocation a = node.scheduler.allocate(r.build());
                        granted.put(a.id(), a);
                    } catch (GpuAllocationException e) {
                        // node full
                    }
                } else if (kind < 82) {
                    List<Allocation> live = node.scheduler.allocations();
                    if (running && !live.isEmpty()) {
                        Allocation a = live.get(rnd.nextInt(live.size()));
                        node.scheduler.release(a.id());
                        released.put(a.id(), node.clock.instant());
                    }
                } else if (kind < 88) {
                    if (running) {
                        node.stopSampler();
                        running = false;
                    } else {
                        node.startSampler();
                        running = true;
                    }
                } else if (kind < 94) { // hours pass: a jump that stays (or a long stop)
                    node.clock.advance(Duration.ofMinutes(30 + rnd.nextInt(20 * 60)));
                    if (running) {
                        node.sweep();
                        node.clock.advance(Duration.ofSeconds(1));
                        node.sweep();
                    }
                } else {
                    int g = rnd.nextInt(3);
                    node.inventory.setTrace(g, UsageTrace.of(Duration.ofSeconds(5 + rnd.nextInt(60)), rnd.nextInt(
                            101), rnd.nextInt(101)));
                }
            }
            if (!running) {
                node.startSampler();
            }
            node.sweep();
            for (Allocation a : node.scheduler.allocations()) {
                node.clock.advance(Duration.ofMillis(300));
                node.sweep();
                node.scheduler.release(a.id());
                released.put(a.id(), node.clock.instant());
            }
            node.clock.advance(Duration.ofSeconds(1));
            node.sweep();
            Instant end = node.clock.instant();
            // days pass with the sampler running: the older days are compacted
            for (int i = 0; i < 4 * 24; i++) {
                node.clock.advance(Duration.ofMinutes(9));
                node.sweep();
                node.clock.advance(Duration.ofMinutes(6));
                node.sweep();
            }
            node.sampler.checkpoint();

            LocalDate firstDay = LocalDate.ofInstant(start, ZoneOffset.UTC);
            LocalDate lastDay = LocalDate.ofInstant(end, ZoneOffset.UTC);
            Instant since = firstDay.atStartOfDay().toInstant(ZoneOffset.UTC);
            Instant until = lastDay.plusDays(1).atStartOfDay().toInstant(ZoneOffset.UTC);
            UsageReport whole = UsageReport.of(node.store, since, until, UsageReport.GroupBy.OWNER);
            UsageReport byAllocation = UsageReport.of(node.store, since, until, UsageReport.GroupBy.ALLOCATION);
            UsageFigures days = new UsageFigures();
            long dayAllocations = 0;
            List<String> summarized = new ArrayList<>();
            for (LocalDate d = firstDay; !d.isAfter(lastDay); d = d.plusDays(1)) {
                Instant s = d.atStartOfDay().toInstant(ZoneOffset.UTC);
                UsageReport r = UsageReport.of(node.store, s, s.plus(Duration.ofDays(1)), UsageReport.GroupBy.OWNER);
                days.add(r.total());
                dayAllocations += r.allocations();
                if (node.store.hasSummary(d)) {
                    summarized.add(d.toString());
                }
            }
            String ctx = "seed " + seed + " (days compacted: " + summarized + ")";
            check(bad, ctx + ": held, per-day reports vs the whole period's", days.heldMillis(),
                    whole.total().heldMillis());
            check(bad, ctx + ": energy, per-day reports vs the whole period's", days.energyMillijoules(),
                    whole.total().energyMillijoules());
            check(bad, ctx + ": allocations, per-day reports vs the whole period's", dayAllocations,
                    whole.allocations());
            check(bad, ctx + ": allocations granted vs the report's", granted.size(), whole.allocations());
            check(bad, ctx + ": held, by owner vs by allocation", whole.total().heldMillis(),
                    byAllocation.total().heldMillis());
            check(bad, ctx + ": energy, by owner vs by allocation", whole.total().energyMillijoules(),
                    byAllocation.total().energyMillijoules());
            long sum = 0;
            for (Allocation a : granted.values()) {
                AllocationUsage u = AllocationUsage.find(node.store, a.id()).orElse(null);
                if (u == null) {
                    bad.add(ctx + ": no record of " + a.id());
                    continue;
                }
                long wall = Duration.between(a.createdAt(), released.get(a.id())).toMillis();
                check(bad, ctx + ": held of " + a.id() + " (" + a.devices().size() + " GPUs, granted "
                        + a.createdAt() + ", released " + released.get(a.id()) + "; " + u.verdict() + ")",
                        u.total().heldMillis(), wall * a.devices().size());
                sum += u.total().heldMillis();
            }
            check(bad, ctx + ": held, the allocations' records vs the whole period's", sum,
                    whole.total().heldMillis());
        }
        return bad;
    }

    private static void check(List<String> bad, String what, long actual, long expected) {
        if (actual != expected) {
            bad.add(what + ": " + actual + ", expected " + expected);
        }
    }
}
