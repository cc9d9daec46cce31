package io.gpusched.core;

import io.gpusched.core.strategy.PackingStrategy;
import io.gpusched.core.strategy.SpreadingStrategy;
import java.util.List;

/** The built-in {@link AllocationStrategy strategies}, by name. */
public final class AllocationStrategies {

    private AllocationStrategies() {
    }

    /** @return names accepted by {@link #byName(String)} and {@code gpu.strategy} */
    public static List<String> names() {
        return List.of(PackingStrategy.NAME, SpreadingStrategy.NAME);
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

    /** @throws IllegalArgumentException naming the valid strategies */
    public static AllocationStrategy byName(String name) {
        if (PackingStrategy.NAME.equals(name)) {
            return packing();
        }
        if (SpreadingStrategy.NAME.equals(name)) {
            return spreading();
        }
        throw new IllegalArgumentException("unknown strategy \"" + name + "\"; valid strategies are " + names());
    }
}
