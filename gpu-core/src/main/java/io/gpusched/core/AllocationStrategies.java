package io.gpusched.core;

import io.gpusched.core.strategy.PackingStrategy;
import io.gpusched.core.strategy.SpreadingStrategy;
import io.gpusched.core.strategy.ThermalAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import java.time.Duration;
import java.util.List;

/** The built-in {@link AllocationStrategy strategies}, by name. */
public final class AllocationStrategies {

    private AllocationStrategies() {
    }

    /** @return names accepted by {@link #byName(String)} and {@code gpu.strategy} */
    public static List<String> names() {
        return List.of(PackingStrategy.NAME, SpreadingStrategy.NAME, TopologyAwareStrategy.NAME,
                TopologyAwareStrategy.REMAINING_NAME, ThermalAwareStrategy.NAME);
    }

    /**
     * @return packing: fill partly used shared GPUs first; place exclusive requests in the fullest NUMA group that
     *         fits, on tightly linked GPUs, keeping large free blocks intact
     */
    public static AllocationStrategy packing() {
        return new PackingStrategy();
    }

    /** @return spreading: least loaded first (shared holders, then utilization), across NUMA groups */
    public static AllocationStrategy spreading() {
        return new SpreadingStrategy();
    }

    /**
     * @return topology-aware with the {@link TopologyAwareStrategy.Objective#SET SET} objective: the best-connected
     * set,
     *         ties by least affinity to the GPUs that stay free; exact
     */
    public static AllocationStrategy topologyAware() {
        return new TopologyAwareStrategy();
    }

    /**
     * @param objective {@link TopologyAwareStrategy.Objective#SET SET} (the set's own connectivity, the default) or
     *                  {@link TopologyAwareStrategy.Objective#REMAINING REMAINING} (the set's plus what is left among
     *                  the free GPUs, go-gpuallocator's best-effort idea)
     * @return topology-aware for that objective; exact
     */
    public static AllocationStrategy topologyAware(TopologyAwareStrategy.Objective objective) {
        return new TopologyAwareStrategy(objective);
    }

    /**
     * @param base   strategy whose ties are broken by temperature and utilization
     * @param maxAge samples older than this are ignored
     * @return thermal/utilization-aware over {@code base}
     */
    public static AllocationStrategy thermalAware(AllocationStrategy base, Duration maxAge) {
        return new ThermalAwareStrategy(base, maxAge);
    }

    /**
     * @return the strategy {@code gpu.strategy} names, with the configuration's sample age for {@code thermal} and its
     *         {@code gpu.placement.work_budget} for every strategy that runs the topology search
     */
    public static AllocationStrategy fromConfig(GpuConfig config) {
        long budget = config.workBudget();
        if (ThermalAwareStrategy.NAME.equals(config.strategy())) {
            return thermalAware(new TopologyAwareStrategy(TopologyAwareStrategy.Objective.SET, budget),
                    config.sampleMaxAge());
        }
        if (TopologyAwareStrategy.NAME.equals(config.strategy())) {
            return new TopologyAwareStrategy(TopologyAwareStrategy.Objective.SET, budget);
        }
        if (TopologyAwareStrategy.REMAINING_NAME.equals(config.strategy())) {
            return new TopologyAwareStrategy(TopologyAwareStrategy.Objective.REMAINING, budget);
        }
        return byName(config.strategy());
    }

    /** @throws IllegalArgumentException naming the valid strategies */
    public static AllocationStrategy byName(String name) {
        if (TopologyAwareStrategy.NAME.equals(name)) {
            return topologyAware();
        }
        if (TopologyAwareStrategy.REMAINING_NAME.equals(name)) {
            return topologyAware(TopologyAwareStrategy.Objective.REMAINING);
        }
        if (ThermalAwareStrategy.NAME.equals(name)) {
            return thermalAware(topologyAware(), Duration.ofSeconds(30));
        }
        if (PackingStrategy.NAME.equals(name)) {
            return packing();
        }
        if (SpreadingStrategy.NAME.equals(name)) {
            return spreading();
        }
        throw new IllegalArgumentException("unknown strategy \"" + name + "\"; valid strategies are " + names());
    }
}
