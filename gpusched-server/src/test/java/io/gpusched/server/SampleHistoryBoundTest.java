package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The history's memory bound at fast sampling ({@code --interval 1ms} used to make 600,001-point rings, about 24 MB
 * per GPU): the ring stays at 6,001 points, the served points still cover the whole ten minutes oldest first, and
 * each slot serves the latest sample taken in it. Checked against the test's own arithmetic, not the ring's.
 */
class SampleHistoryBoundTest {
    static final long T0 = 1_700_000_000_000L;

    @TempDir
    Path state;

    @Test
    void oneMillisecondSamplingKeepsAtMostSixThousandAndOnePointsOverTheWholeWindow() {
        AtomicLong now = new AtomicLong(T0);
        Clock clock = new Clock() {
            @Override
            public ZoneOffset getZone() {
                return ZoneOffset.UTC;
            }

            @Override
            public Clock withZone(java.time.ZoneId zone) {
                return this;
            }

            @Override
            public Instant instant() {
                return Instant.ofEpochMilli(now.get());
            }
        };
        SampleHistory h = new SampleHistory(clock, Duration.ofMinutes(10), Duration.ofMillis(1));
        assertThat(h.capacity()).isEqualTo(6_001);
        // twelve minutes of 1 ms samples; each sample's utilization is its millisecond count mod 100000, so a served
        // point's value tells which sample it is
        long total = Duration.ofMinutes(12).toMillis();
        for (long ms = 0; ms <= total; ms++) {
            now.set(T0 + ms);
            h.add(0, new SampleHistory.Point(T0 + ms, (double) (ms % 100_000), ms, 50.0, 100.0));
        }
        List<SampleHistory.Point> pts = h.points(Optional.of(0), Duration.ofMinutes(10)).get(0);
        long end = T0 + total;
        assertThat(pts.size()).isBetween(5_999, 6_001);
        long prev = Long.MIN_VALUE;
        for (SampleHistory.Point p : pts) {
            assertThat(p.t()).isBetween(end - Duration.ofMinutes(10).toMillis(), end).isGreaterThan(prev);
            prev = p.t();
            // each slot holds the latest sample of its 100 ms: t is the sample's own time, values match it
            assertThat(p.memUsed()).isEqualTo(p.t() - T0);
            assertThat(p.util()).isEqualTo((double) ((p.t() - T0) % 100_000));
        }
        // the window is covered: oldest within one slot of its start, the newest is the last sample
        assertThat(pts.get(0).t()).isLessThanOrEqualTo(end - Duration.ofMinutes(10).toMillis() + 100);
        assertThat(pts.get(pts.size() - 1).t()).isEqualTo(end);
        // at 100 ms or slower every sample keeps its own slot (no change from before)
        assertThat(new SampleHistory(clock, Duration.ofMinutes(10), Duration.ofMillis(100)).stride()).isZero();
        assertThat(new SampleHistory(clock, Duration.ofMinutes(10), Duration.ofSeconds(1)).capacity()).isEqualTo(601);
    }

    @Test
    void theConsoleBuiltWithOneMillisecondUsesTheBoundedRingAndRefusesLess() {
        SimulatedGpuInventory inventory = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build()) {
            ConsoleServer.Builder b = ConsoleServer.builder().scheduler(scheduler).inventory(inventory)
                    .stateDir(state).listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            try (ConsoleServer c = b.sampleInterval(Duration.ofMillis(1)).ticking(false).build()) {
                assertThat(c.watcher().history().capacity()).isEqualTo(SampleHistory.MAX_POINTS);
            }
            for (Duration d : List.of(Duration.ofNanos(999_999), Duration.ZERO, Duration.ofMillis(-1))) {
                assertThatThrownBy(() -> b.sampleInterval(d)).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining(d.toString()).hasMessageContaining("minimum of 1 ms");
            }
        } finally {
            inventory.close();
        }
    }
}
