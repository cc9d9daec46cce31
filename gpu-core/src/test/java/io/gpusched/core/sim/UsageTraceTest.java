package io.gpusched.core.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.offset;

import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuProcessUsage;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ProcessUsageSample;
import io.gpusched.testing.ManualClock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Scripted usage on simulated nodes: the values a trace implies, exactly, at the times it implies them. */
class UsageTraceTest {
    private static final Instant T0 = Instant.parse("2026-03-01T00:00:00Z");

    private static final String NODE = """
            node: traced
            defaults: {vendor: NVIDIA, name: A, memory: 40GiB, compute_capability: "8.0"}
            devices:
              - {index: 0, pci_bus_id: "a", usage: {step: 10s, utilization: [90, 0], memory: [20GiB, 2GiB],
                 power: [250, 60]}}
              - {index: 1, pci_bus_id: "b", processes: [{pid: 4242, step: 10s, utilization: [40, 20]},
                                                        {pid: 4343, step: 5s, utilization: [10], memory: [8GiB]}]}
              - {index: 2, pci_bus_id: "c", energy_counter: false, usage: idle}
              - {index: 3, pci_bus_id: "d", parent: GPU-parent, processes: [{pid: 7, utilization: [50]}]}
            """;

    private static SimulatedGpuInventory node(ManualClock clock) {
        SimulatedGpuInventory parsed = NodeDescriptions.parse(NODE, "traced.yaml");
        // rebuild with the manual clock: the description's devices and traces, the test's time
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("traced").clock(clock);
        parsed.devices().forEach(b::device);
        b.trace(0, new UsageTrace(Duration.ofSeconds(10), List.of(90.0, 0.0),
                List.of(MemorySize.ofGibibytes(20), MemorySize.ofGibibytes(2)), List.of(250.0, 60.0)));
        b.processTraces(1, Map.of(4242, UsageTrace.of(Duration.ofSeconds(10), 40, 20),
                4343, new UsageTrace(Duration.ofSeconds(5), List.of(10.0), List.of(MemorySize.ofGibibytes(8)),
                        List.of())));
        b.processTraces(3, Map.of(7, UsageTrace.of(Duration.ofSeconds(10), 50)));
        b.energyCounters(true).energyCounter(2, false);
        return b.build();
    }

    @Test
    void deviceTraceValuesAreThoseOfTheStepJustEnded() {
        ManualClock clock = new ManualClock(T0);
        SimulatedGpuInventory inv = node(clock);
        clock.advance(Duration.ofSeconds(10)); // step [0,10) had 90 %
        GpuMetrics m = inv.sample().forDevice(0).orElseThrow();
        assertThat(m.utilizationPercent()).hasValue(90);
        assertThat(m.memoryUsed()).contains(MemorySize.ofGibibytes(20));
        assertThat(m.powerWatts()).hasValue(250);
        clock.advance(Duration.ofSeconds(10));
        assertThat(inv.sample().forDevice(0).orElseThrow().utilizationPercent()).hasValue(0);
    }

    @Test
    void energyCounterIsTheExactIntegralOfPower() {
        ManualClock clock = new ManualClock(T0);
        SimulatedGpuInventory inv = node(clock);
        long e0 = inv.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();
        clock.advance(Duration.ofSeconds(35)); // 10 s x 250 W + 10 s x 60 W + 10 s x 250 W + 5 s x 60 W
        long e1 = inv.sample().forDevice(0).orElseThrow().energyMillijoules().getAsLong();
        assertThat(e1 - e0).isEqualTo((2500 + 600 + 2500 + 300) * 1000L);
        assertThat(inv.sample().forDevice(2).orElseThrow().energyMillijoules()).as("energy_counter: false")
                .isEmpty();
        assertThat(inv.hasEnergyCounter(2)).isFalse();
    }

    @Test
    void processUsageIsTheExactMeanSinceThePreviousCall() {
        ManualClock clock = new ManualClock(T0);
        SimulatedGpuInventory inv = node(clock);
        inv.processUsage(inv.devices().get(1));
        clock.advance(Duration.ofSeconds(15)); // pid 4242: 10 s at 40, 5 s at 20 -> 100/3
        ProcessUsageSample s = inv.processUsage(inv.devices().get(1)).orElseThrow();
        GpuProcessUsage a = s.processes().stream().filter(p -> p.pid() == 4242).findFirst().orElseThrow();
        GpuProcessUsage b = s.processes().stream().filter(p -> p.pid() == 4343).findFirst().orElseThrow();
        assertThat(a.smUtilizationPercent().getAsDouble()).isCloseTo(100.0 / 3, offset(1e-9));
        assertThat(b.smUtilizationPercent()).hasValue(10);
        assertThat(b.memoryUsed()).contains(MemorySize.ofGibibytes(8));
        assertThat(a.memoryUsed()).isEmpty();
        assertThat(s.utilizationUnmeasured()).isEmpty();
        // the device without a trace of its own shows the sum of its processes' (20 + 10 at 15 s)
        assertThat(inv.sample().forDevice(1).orElseThrow().utilizationPercent()).hasValue(30);
    }

    @Test
    void migPartitionsReportNoUtilizationSayingWhy() {
        ManualClock clock = new ManualClock(T0);
        SimulatedGpuInventory inv = node(clock);
        clock.advance(Duration.ofSeconds(10));
        ProcessUsageSample s = inv.processUsage(inv.devices().get(3)).orElseThrow();
        assertThat(s.utilizationUnmeasured()).contains(SimulatedGpuInventory.MIG_UTILIZATION_REASON);
        assertThat(s.processes()).singleElement().satisfies(p -> assertThat(p.smUtilizationPercent()).isEmpty());
        assertThat(inv.sample().forDevice(3).orElseThrow().utilizationPercent()).isEmpty();
    }

    @Test
    void descriptionsParseTracesAndRefuseBadOnes() {
        SimulatedGpuInventory inv = NodeDescriptions.parse(NODE, "traced.yaml");
        assertThat(inv.hasEnergyCounter(0)).isTrue();
        assertThat(inv.hasEnergyCounter(2)).isFalse();
        assertThat(inv.processUsage(inv.devices().get(1)).orElseThrow().processes()).hasSize(2);
        assertThat(inv.processUsage(inv.devices().get(0))).as("no processes scripted: cannot list").isEmpty();
        assertThat(NodeDescriptions.profile("dgx1-v100").hasEnergyCounter(0)).as("V100 is Volta").isTrue();
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("[90, 0]", "[90, 101]"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("0 to 100");
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("[20GiB, 2GiB]", "[50GiB]"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("memory[0]");
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("usage: idle", "usage: busy"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("training, inference, idle");
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("[90, 0]", "[9e9]"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("utilization[0]");
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("step: 5s", "step: 0ms"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("1ms");
        assertThatThrownBy(() -> NodeDescriptions.parse(NODE.replace("pid: 4343", "pid: 4242"), "n.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("twice");
    }

    @Test
    void setMetricsStopsATrace() {
        ManualClock clock = new ManualClock(T0);
        SimulatedGpuInventory inv = node(clock);
        inv.setMetrics(0, 12, MemorySize.ZERO, 40, 100);
        clock.advance(Duration.ofSeconds(10));
        assertThat(inv.sample().forDevice(0).orElseThrow().utilizationPercent()).hasValue(12);
    }
}
