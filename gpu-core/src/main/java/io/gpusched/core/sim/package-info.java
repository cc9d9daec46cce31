/**
 * The simulated inventory: named node profiles (such as {@code dgx1-v100}) and node descriptions in YAML, with
 * settable metrics and health for tests and demos. Start with {@link io.gpusched.core.sim.SimulatedGpuInventory}, or
 * {@code GpuInventories.simulated(profile)}.
 */
package io.gpusched.core.sim;
