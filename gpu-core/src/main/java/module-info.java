/**
 * gpusched's core: the values ({@link io.gpusched.core.GpuDevice}, {@link io.gpusched.core.GpuRequest},
 * {@link io.gpusched.core.Allocation}), the inventory SPI ({@link io.gpusched.core.GpuInventory},
 * {@link io.gpusched.core.GpuInventoryProvider}, found with {@link java.util.ServiceLoader}) and the scheduler
 * ({@link io.gpusched.core.GpuScheduler}). Start at {@link io.gpusched.core.GpuInventories} and
 * {@link io.gpusched.core.GpuScheduler}; hosts that serve a whole node start at {@link io.gpusched.core.host.GpuNode}.
 *
 * <p>{@code io.gpusched.core.internal} is not API: it is exported only to gpusched's own modules (their automatic
 * module names, set in their jars' manifests). The jars are built for the class path as well: every other module of
 * the project, and the engines' shaded drop-in jars (which leave this descriptor out), use gpu-core from the class
 * path, where this file has no effect.
 */
module io.gpusched.core {
    requires org.slf4j;
    requires com.fasterxml.jackson.databind;
    requires org.yaml.snakeyaml;

    exports io.gpusched.core;
    exports io.gpusched.core.devices;
    exports io.gpusched.core.host;
    exports io.gpusched.core.sim;
    exports io.gpusched.core.strategy;
    exports io.gpusched.core.internal to
            io.gpusched.nvml,
            io.gpusched.rocm,
            io.gpusched.cuda,
            io.gpusched.cdi,
            io.gpusched.slurm,
            io.gpusched.server,
            io.gpusched.accounting,
            io.gpusched.service,
            io.gpusched.cli;

    // the ledger's records and the status views are read and written by Jackson
    opens io.gpusched.core to com.fasterxml.jackson.databind;

    uses io.gpusched.core.GpuInventoryProvider;
}
