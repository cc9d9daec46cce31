package io.gpusched.nvml;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.nvml.internal.NvmlReturn;
import io.gpusched.nvml.internal.NvmlSession;
import io.gpusched.nvml.internal.NvmlSession.RawDevice;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Reads an NVML node's topology once, when the inventory opens: PCIe levels, NVLink counts, NVSwitch. */
final class NvmlTopology {
    private static final Logger LOG = LoggerFactory.getLogger(NvmlTopology.class);

    private NvmlTopology() {
    }

    /**
     * PCIe levels per GPU pair, NVLink counts from each active link's remote bus id, NVSwitch as all-to-all. GPUs
     * without a handle or already lost are not asked. A failing pair query cannot say which GPU failed: the level
     * stays unknown and both GPUs get a live check ({@code suspects}); a failing NVLink query is a fault of its GPU
     * ({@code faults}, by NVML index).
     */
    static GpuTopology read(NvmlSession session, List<RawDevice> raw, List<GpuDevice> devs,
            NvmlSession.Discovery found, Set<Integer> suspects,
            BiConsumer<Integer, NvmlSession.Fault> faults) {
        int gpus = found.gpuCount();
        long[] gpuHandles = found.gpuHandles();
        boolean[] ask = new boolean[gpus];
        for (int g = 0; g < gpus; g++) {
            NvmlSession.Fault f = found.gpuFaults()[g];
            ask[g] = gpuHandles[g] != 0 && (f == null || !(f.lost() || f.code() == NvmlReturn.ERROR_TIMEOUT.code()));
        }
        Map<String, Integer> byBus = new HashMap<>();
        for (RawDevice r : raw) {
            r.pciBusId().flatMap(PciBusIds::normalize).ifPresent(b -> byBus.put(b, r.nvmlIndex()));
        }
        int[][] links = new int[gpus][gpus];
        int[] switchLinks = new int[gpus];
        for (int g = 0; g < gpus; g++) {
            if (!ask[g]) {
                continue;
            }
            NvmlSession.Links l = session.nvLinkPeers(gpuHandles[g]);
            final int gg = g;
            l.fault().ifPresent(f -> faults.accept(gg, f));
            for (String peer : l.peers()) {
                if (peer.equals("NVSWITCH")) {
                    switchLinks[g]++;
                    continue;
                }
                Integer other = PciBusIds.normalize(peer).map(byBus::get).orElse(null);
                if (other != null && other != g) {
                    links[g][other]++;
                }
            }
        }
        PcieLevel[][] levels = new PcieLevel[gpus][gpus];
        for (int a = 0; a < gpus; a++) {
            for (int b = a + 1; b < gpus; b++) {
                if (ask[a] && ask[b]) {
                    NvmlSession.IntAnswer level = session.commonAncestor(gpuHandles[a], gpuHandles[b]);
                    if (level.code() == 0) {
                        levels[a][b] = pcieLevel(level.value());
                    } else if (!NvmlSession.benign(level.code())
                            && level.code() != NvmlReturn.ERROR_FUNCTION_NOT_FOUND.code()) {
                        LOG.debug("nvmlDeviceGetTopologyCommonAncestor({}, {}): {}", a, b,
                                NvmlReturn.describe(level.code()));
                        suspects.add(a);
                        suspects.add(b);
                    }
                }
                int nv = Math.max(links[a][b], links[b][a]);
                if (switchLinks[a] > 0 && switchLinks[b] > 0) {
                    nv = Math.max(nv, Math.min(switchLinks[a], switchLinks[b]));
                }
                links[a][b] = nv;
                links[b][a] = nv;
            }
        }
        GpuTopology.Builder t = GpuTopology.builder(devs);
        for (int i = 0; i < devs.size(); i++) {
            for (int j = i + 1; j < devs.size(); j++) {
                int pa = raw.get(i).nvmlIndex();
                int pb = raw.get(j).nvmlIndex();
                int ia = devs.get(i).index();
                int ib = devs.get(j).index();
                if (pa == pb) {
                    t.pcie(ia, ib, PcieLevel.INTERNAL);
                    continue;
                }
                int lo = Math.min(pa, pb);
                int hi = Math.max(pa, pb);
                if (levels[lo][hi] != null) {
                    t.pcie(ia, ib, levels[lo][hi]);
                }
                if (links[lo][hi] > 0) {
                    t.links(ia, ib, links[lo][hi]);
                }
            }
        }
        return t.build();
    }

    static PcieLevel pcieLevel(int nvmlLevel) {
        return switch (nvmlLevel) {
            case 0 -> PcieLevel.INTERNAL;
            case 10 -> PcieLevel.SINGLE;
            case 20 -> PcieLevel.MULTIPLE;
            case 30 -> PcieLevel.HOSTBRIDGE;
            case 40 -> PcieLevel.NODE;
            default -> PcieLevel.SYSTEM;
        };
    }
}
