package io.gpusched.examples;

import io.gpusched.cli.Tables;
import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;

/** Opens whatever backend this host has (NVML, ROCm SMI, sysfs, nvidia-smi) and prints its GPUs, links and metrics. */
public final class DiscoverNode {
    private DiscoverNode() {
    }

    /** @param args ignored */
    public static void main(String[] args) {
        GpuInventories.providers().forEach(p -> System.out.println("provider " + p.name() + ": "
                + (p.available() ? "available" : p.cause().orElse(""))));
        try (GpuInventory inv = GpuInventories.detect()) {
            System.out.println("backend " + inv.backend());
            System.out.print(Tables.devices(inv.devices()));
            System.out.print(Tables.topology(inv.devices(), inv.topology()));
            for (GpuMetrics m : inv.sample().metrics()) {
                System.out.println("GPU " + m.index() + " " + m);
            }
        } catch (BackendUnavailableException e) {
            System.out.println("no GPU backend here: " + e.getMessage());
        }
    }
}
