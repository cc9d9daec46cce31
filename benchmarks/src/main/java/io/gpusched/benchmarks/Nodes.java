package io.gpusched.benchmarks;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.sim.SimulatedGpuInventory;

/**
 * Benchmark nodes: the built-in profiles plus a 16-GPU topology and three partitioned pools: {@code parts-64} (8 A100 x
 * 8 MIG-like, NVLinked in halves), {@code mi300x-cpx-64} (8 MI300X-like packages x 8 CPX partitions, one XGMI link
 * between every two packages) and {@code h100-mig-56} (8 H100 x 7 MIG 1g partitions, NVSwitch: 18 links between every
 * two GPUs). Partitions of one GPU or package are INTERNAL to each other; GPUs 0-3 on NUMA node 0, 4-7 on node 1.
 */
final class Nodes {
    private Nodes() {
    }

    static GpuInventory named(String name) {
        return switch (name) {
            case "dgx1-x2" -> dgx1Pair();
            case "parts-64" -> partitions64();
            case "mi300x-cpx-64" -> mi300xCpx64();
            case "h100-mig-56" -> h100Mig56();
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

    /** 8 MI300X-like packages x 8 CPX partitions: one XGMI link between every two packages. */
    static GpuInventory mi300xCpx64() {
        return partitioned("mi300x-cpx-64", GpuVendor.AMD, "AMD Instinct MI300X CPX", 8, 8, 1, 24);
    }

    /** 8 H100 x 7 MIG 1g.10gb partitions over an NVSwitch fabric (18 links between every two GPUs). */
    static GpuInventory h100Mig56() {
        return partitioned("h100-mig-56", GpuVendor.NVIDIA, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 8, 7, 18, 10);
    }

    static GpuInventory partitioned(String name, GpuVendor vendor, String model, int gpus, int per, int links,
            int gib) {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder(name);
        int n = gpus * per;
        for (int i = 0; i < n; i++) {
            b.device(GpuDevice.builder().index(i).uuid(name + "-" + i).vendor(vendor).name(model)
                    .memory(MemorySize.ofGibibytes(gib)).pciBusId("00000000:" + (10 + i / per) + ":00.0")
                    .numaNode((i / per) < gpus / 2 ? 0 : 1).minor(i / per).parentUuid(name + "-gpu-" + (i / per))
                    .build());
        }
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                if (i / per == j / per) {
                    b.pcie(i, j, PcieLevel.INTERNAL);
                } else {
                    b.links(i, j, links);
                    b.pcie(i, j, (i / per) / (gpus / 2) == (j / per) / (gpus / 2) ? PcieLevel.NODE : PcieLevel.SYSTEM);
                }
            }
        }
        return b.build();
    }
}
