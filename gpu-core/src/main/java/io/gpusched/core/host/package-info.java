/**
 * What a host process (the command, the console, an engine's plug-in) needs to serve a node without wiring it itself.
 * Start with {@link io.gpusched.core.host.GpuNode}: inventory from an {@link io.gpusched.core.host.InventorySpec}
 * ({@code auto}, {@code simulated:<profile|file>}), the state directory by the one
 * {@link io.gpusched.core.host.StateDirectory} rule, and a scheduler; {@link io.gpusched.core.host.ProcessGpus} is the
 * per-process allocation helper.
 */
package io.gpusched.core.host;
