package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 23: {@code gpu.placement.work_budget} sets the topology search's budget for every strategy that runs it
 * (topology, topology-remaining, thermal), "exact" included; bad values are refused naming the key and what is valid;
 * the thermal strategy passes its base's certificate through.
 */
class PlacementBudgetConfigTest {

    private static GpuConfig parse(String strategy, String budget) {
        return GpuConfig.parse("gpu:\n  strategy: " + strategy + "\n  placement: {work_budget: " + budget + "}\n",
                "test.yaml");
    }

    @Test
    void theKeyReachesTheTopologyStrategies() {
        GpuConfig exact = parse("topology", "exact");
        assertThat(exact.workBudget()).isEqualTo(TopologyAwareStrategy.EXACT);
        AllocationStrategy s = AllocationStrategies.fromConfig(exact);
        assertThat(s).isInstanceOf(TopologyAwareStrategy.class);
        assertThat(((TopologyAwareStrategy) s).workBudget()).isEqualTo(TopologyAwareStrategy.EXACT);
        assertThat(((TopologyAwareStrategy) s).objective()).isEqualTo(Objective.SET);

        GpuConfig some = parse("topology-remaining", "12345");
        TopologyAwareStrategy r = (TopologyAwareStrategy) AllocationStrategies.fromConfig(some);
        assertThat(r.workBudget()).isEqualTo(12_345);
        assertThat(r.objective()).isEqualTo(Objective.REMAINING);

        assertThat(parse("topology", "EXACT").workBudget()).isEqualTo(TopologyAwareStrategy.EXACT);
        assertThat(GpuConfig.parse("gpu: {strategy: topology}\n", "t").workBudget())
                .isEqualTo(TopologyAwareStrategy.DEFAULT_WORK_BUDGET);
        assertThat(GpuConfig.defaults().workBudget()).isEqualTo(TopologyAwareStrategy.DEFAULT_WORK_BUDGET);
        assertThat(GpuConfig.builder().workBudget(5_000).build().withStrategy("topology").workBudget())
                .isEqualTo(5_000);
    }

    @ParameterizedTest
    @ValueSource(strings = {"999", "0", "-5", "lots", "1.5e6", "'  '", "9223372036854775808"})
    void badValuesNameTheKeyAndWhatIsValid(String bad) {
        assertThatThrownBy(() -> parse("topology", bad))
                .isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("test.yaml")
                .hasMessageContaining("gpu.placement.work_budget")
                .hasMessageContaining("exact")
                .hasMessageContaining(">= 1000");
    }

    @Test
    void unknownPlacementKeysAndBuilderValuesAreRefused() {
        assertThatThrownBy(() -> GpuConfig.parse("gpu:\n  placement: {budget: 5000}\n", "t.yaml"))
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.placement.budget");
        assertThatThrownBy(() -> GpuConfig.builder().workBudget(10).build())
                .isInstanceOf(GpuConfigException.class).hasMessageContaining("gpu.placement.work_budget")
                .hasMessageContaining("exact");
    }

    /** An irregular node: 1-4 links on a third of the pairs, random PCIe levels, a quarter held. */
    private static SchedulingView irregular(long seed, int n) {
        Random r = new Random(seed);
        List<GpuDevice> devs = StrategyFakes.devices(n, new int[n]);
        GpuTopology.Builder b = GpuTopology.builder(devs);
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                if (r.nextInt(3) == 0) {
                    b.links(i, j, 1 + r.nextInt(4));
                }
                b.pcie(i, j, PcieLevel.values()[1 + r.nextInt(PcieLevel.values().length - 1)]);
            }
        }
        Set<Integer> held = new HashSet<>();
        for (int i = 0; i < n; i++) {
            if (r.nextInt(4) == 0) {
                held.add(i);
            }
        }
        return StrategyFakes.view(devs, b.build(), held);
    }

    @Test
    void theThermalStrategyPassesTheCertificateThrough() {
        SchedulingView v = irregular(77, 48);
        GpuRequest req = GpuRequest.builder().count(8).build();
        // no metrics: the thermal ranks keep candidate order, so the base sees the same pool
        AllocationStrategy tiny = AllocationStrategies.fromConfig(parse("thermal", "1000"));
        AllocationStrategy.Choice got = tiny.choose(req, v);
        AllocationStrategy.Choice base = new TopologyAwareStrategy(Objective.SET, 1_000).choose(req, v);
        assertThat(got.quality().rated()).isTrue();
        assertThat(got.quality().provenOptimal()).as("1,000 units end this search early").isFalse();
        assertThat(got.quality()).isEqualTo(base.quality());
        assertThat(got.devices()).isEqualTo(base.devices());

        AllocationStrategy exact = AllocationStrategies.fromConfig(parse("thermal", "exact"));
        AllocationStrategy.Choice proven = exact.choose(req, v);
        assertThat(proven.quality().provenOptimal()).isTrue();
        assertThat(proven.devices()).hasSize(8);
    }
}
