package io.gpusched.nvml;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuHealth;
import io.gpusched.testing.ManualClock;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The device health state machine alone: no NVML, no native fake, time from a hand-driven clock. */
class DeviceHealthTest {
    private static final Duration RECOVERY = Duration.ofSeconds(30);
    private static final int LOST = 15;
    private static final int UNKNOWN_ERROR = 999;

    private final ManualClock clock = new ManualClock();
    private final List<String> described = new ArrayList<>();
    private final DeviceHealth health = new DeviceHealth(3, clock, RECOVERY, (call, status) -> {
        described.add(call + ":" + status);
        return status == LOST ? GpuHealth.lost(call + " lost") : GpuHealth.unhealthy(call + " error " + status);
    });

    @Test
    void aFailureDegradesAndRecoveryNeedsCleanAnswersForTheWholePeriod() {
        assertThat(health.get(0)).isEqualTo(GpuHealth.HEALTHY);
        assertThat(health.live(0, 0, 3, null)).as("a clean answer of a healthy device changes nothing").isNull();

        GpuHealth bad = health.live(0, UNKNOWN_ERROR, 1, "nvmlDeviceGetTemperature");
        assertThat(bad.state()).isEqualTo(GpuHealth.State.UNHEALTHY);
        assertThat(health.get(0)).isEqualTo(bad);
        assertThat(health.recovering(0)).isTrue();
        assertThat(health.get(1)).as("other devices untouched").isEqualTo(GpuHealth.HEALTHY);

        assertThat(health.live(0, 0, 3, null)).as("first clean answer starts the period").isNull();
        clock.advance(RECOVERY.minusMillis(1));
        assertThat(health.live(0, 0, 3, null)).isNull();
        assertThat(health.live(0, 0, 0, null)).as("no live call answered: does not count").isNull();
        clock.advance(Duration.ofMillis(1));
        assertThat(health.live(0, 0, 3, null)).isEqualTo(GpuHealth.HEALTHY);
        assertThat(health.get(0)).isEqualTo(GpuHealth.HEALTHY);
        assertThat(health.recovering(0)).isFalse();
    }

    @Test
    void aFailureDuringRecoveryStartsThePeriodOver() {
        health.live(1, UNKNOWN_ERROR, 0, "nvmlDeviceGetUtilizationRates");
        health.live(1, 0, 3, null);
        clock.advance(RECOVERY.minusSeconds(1));
        assertThat(health.live(1, UNKNOWN_ERROR, 0, "nvmlDeviceGetUtilizationRates"))
                .as("the same failure again: no new announcement").isNull();
        clock.advance(Duration.ofSeconds(2)); // past the first period's end, but the period started over
        assertThat(health.live(1, 0, 3, null)).isNull();
        clock.advance(RECOVERY);
        assertThat(health.live(1, 0, 3, null)).isEqualTo(GpuHealth.HEALTHY);
        assertThat(described).as("a repeated failure reuses its health").containsExactly(
                "nvmlDeviceGetUtilizationRates:999");
    }

    @Test
    void lostStaysLostUnderMilderErrorsAndAFailingCallWithoutANameIsNvml() {
        GpuHealth lost = health.live(2, LOST, 0, null);
        assertThat(lost.state()).isEqualTo(GpuHealth.State.LOST);
        assertThat(described).containsExactly("NVML:15");
        assertThat(health.degrade(2, GpuHealth.unhealthy("XID 79"))).isNull();
        assertThat(health.get(2)).isEqualTo(lost);
    }

    @Test
    void aPinnedDeviceNeverChangesAndOpenFaultsTouchOnlyHealthyDevices() {
        GpuHealth pinned = GpuHealth.unhealthy("identity unreadable");
        health.start(0, pinned, true);
        assertThat(health.degrade(0, GpuHealth.lost("gone"))).isNull();
        clock.advance(RECOVERY.multipliedBy(3));
        assertThat(health.live(0, 0, 3, null)).isNull();
        assertThat(health.get(0)).isEqualTo(pinned);
        assertThat(health.recovering(0)).as("pinned: not a recovery candidate").isFalse();

        GpuHealth first = GpuHealth.unhealthy("topology");
        health.openFault(1, first);
        health.openFault(1, GpuHealth.lost("events"));
        assertThat(health.get(1)).as("the first fault found at open stays").isEqualTo(first);
        health.openFault(0, GpuHealth.lost("events"));
        assertThat(health.get(0)).isEqualTo(pinned);
    }

}
