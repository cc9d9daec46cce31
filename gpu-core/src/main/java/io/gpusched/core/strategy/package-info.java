/**
 * The built-in {@link io.gpusched.core.AllocationStrategy} implementations: packing, spreading, topology-aware
 * (exact or bounded search over link scores, {@link io.gpusched.core.strategy.TopologyScores}) and thermal/utilization
 * aware. Pick one by name with {@code AllocationStrategies}.
 */
package io.gpusched.core.strategy;
