package io.gpusched.benchmarks;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.sim.SimulatedGpuInventory;

/** Benchmark nodes: the built-in profiles plus a 16-GPU topology and a 64-partition pool. */
final class Nodes {
    private Nodes() {
    }

    static GpuInventory named(String name) {
        return switch (name) {
            case "dgx1-x2" -> dgx1Pair();
            case "parts-64" -> partitions64();
            default -> GpuInventories.simulated(name);
        };
    }

    /** Two DGX-1 hybrid cube meshes joined over the inter-socket link: 16 GPUs, 4 NUMA nodes. */
    static GpuInventory dgx1Pair() {
        GpuInventory half = GpuInventories.simulated("dgx1-v100");
        GpuTopology t = half.topology();
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("dgx1-x2");
        for (int h = 0; h < 2; h++) {
            for (GpuDevice d : half.devices()) {
                int i = h * 8 + d.index();
                b.device(GpuDevice.builder().index(i).uuid("GPU-x2-" + i).vendor(GpuVendor.NVIDIA).name(d.name())
                        .memory(d.memory()).pciBusId("0000000" + h + ":" + d.pciBusId().substring(9))
                        .numaNode(h * 2 + d.numaNode().getAsInt()).minor(i).build());
            }
        }
        for (int h = 0; h < 2; h++) {
            for (int a = 0; a < 8; a++) {
                for (int c = a + 1; c < 8; c++) {
                    if (t.linkCount(a, c) > 0) {
                        b.links(h * 8 + a, h * 8 + c, t.linkCount(a, c));
                    }
                    b.pcie(h * 8 + a, h * 8 + c, t.pcieLevel(a, c));
                }
            }
        }
        return b.build();
    }

    /** 8 GPUs x 8 MIG-like partitions; partitions of one GPU are INTERNAL, GPUs in pairs of 4 NVLinked. */
    static GpuInventory partitions64() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("parts-64");
        for (int i = 0; i < 64; i++) {
            b.device(GpuDevice.builder().index(i).uuid("MIG-p-" + i).vendor(GpuVendor.NVIDIA)
                    .name("NVIDIA A100-SXM4-80GB MIG 1g.10gb").memory(MemorySize.ofGibibytes(10))
                    .pciBusId("00000000:" + (10 + i / 8) + ":00.0").numaNode(i / 32).minor(i / 8)
                    .parentUuid("GPU-p-" + (i / 8)).build());
        }
        for (int i = 0; i < 64; i++) {
            for (int j = i + 1; j < 64; j++) {
                if (i / 8 == j / 8) {
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else if (i / 32 == j / 32) {
                    b.links(i, j, 12);
                }
            }
        }
        return b.build();
    }
}
