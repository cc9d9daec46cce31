package io.gpusched.kubernetes;

import static io.gpusched.kubernetes.KubeletProtocolTest.config;
import static io.gpusched.kubernetes.KubeletProtocolTest.ids;
import static io.gpusched.kubernetes.KubeletProtocolTest.kubeletDir;
import static io.gpusched.kubernetes.KubeletProtocolTest.preferred;
import static io.gpusched.kubernetes.KubeletProtocolTest.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.kubernetes.api.v1beta1.ContainerPreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.DevicePluginGrpc;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationRequest;
import io.gpusched.kubernetes.api.v1beta1.PreferredAllocationResponse;
import io.gpusched.kubernetes.internal.UnixSockets;
import io.grpc.Status;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * GetPreferredAllocation over the socket, judged independently: every answer against an exact search written here (all
 * subsets of the available GPUs that hold the must-include ones, scored by the documented pair score), and against the
 * answers of go-gpuallocator's own test cases (its best-effort policy, NVIDIA's device plug-in): same or better score.
 */
class PreferredAllocationTest {
    @TempDir
    Path dir;

    @BeforeEach
    void epoll() {
        assumeTrue(UnixSockets.available(), () -> "epoll Unix domain sockets unavailable here: "
                + UnixSockets.unavailabilityCause());
    }

    /** The documented pair score: 100 per NVLink/XGMI link plus the PCIe term (not gpusched's PairScore). */
    static int pair(GpuTopology t, int a, int b) {
        int pcie = switch (t.pcieLevel(a, b)) {
            case INTERNAL -> 60;
            case SINGLE -> 50;
            case MULTIPLE -> 40;
            case HOSTBRIDGE -> 30;
            case NODE -> 20;
            case SYSTEM -> 10;
        };
        return 100 * t.linkCount(a, b) + pcie;
    }

    static long score(GpuTopology t, List<Integer> set) {
        long s = 0;
        for (int i = 0; i < set.size(); i++) {
            for (int j = i + 1; j < set.size(); j++) {
                s += pair(t, set.get(i), set.get(j));
            }
        }
        return s;
    }

    /** The best score of any k-subset of {@code free} holding {@code must}, by enumerating them all. */
    static long exactBest(GpuTopology t, List<Integer> free, List<Integer> must, int k) {
        long best = Long.MIN_VALUE;
        int n = free.size();
        for (int mask = 0; mask < 1 << n; mask++) {
            if (Integer.bitCount(mask) != k) {
                continue;
            }
            List<Integer> set = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if ((mask & 1 << i) != 0) {
                    set.add(free.get(i));
                }
            }
            if (set.containsAll(must)) {
                best = Math.max(best, score(t, set));
            }
        }
        return best;
    }

    @Test
    void dgx1AndDgxH100OccupancyStatesGetTheExactBestSet() throws Exception {
        for (String profile : List.of("dgx1-v100", "dgx-h100")) {
            Path d = dir.resolve(profile);
            try (SimulatedGpuInventory inv = GpuInventories.simulated(profile);
                 KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(d));
                 KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(d).build())) {
                kubelet.awaitRegistration(1);
                DevicePluginGrpc.DevicePluginBlockingStub c = kubelet.client("nvidia.com/gpu");
                GpuTopology t = inv.topology();
                Map<String, Integer> indexOf = new HashMap<>();
                inv.devices().forEach(g -> indexOf.put(g.uuid(), g.index()));
                Random rnd = new Random(27);
                int naiveWrong = 0;
                int withMust = 0;
                for (int trial = 0; trial < 300; trial++) {
                    List<Integer> free = new ArrayList<>();
                    for (int i = 0; i < 8; i++) {
                        if (rnd.nextInt(3) > 0) {
                            free.add(i);
                        }
                    }
                    if (free.isEmpty()) {
                        continue;
                    }
                    int k = 1 + rnd.nextInt(free.size());
                    List<Integer> shuffled = new ArrayList<>(free);
                    Collections.shuffle(shuffled, rnd);
                    List<Integer> must = new ArrayList<>(shuffled.subList(0, rnd.nextInt(Math.min(k, 3) + 1)));
                    Collections.shuffle(shuffled, rnd);
                    withMust += must.isEmpty() ? 0 : 1;
                    List<String> answer = c.getPreferredAllocation(preferred(
                            ids(inv, shuffled.stream().mapToInt(Integer::intValue).toArray()),
                            ids(inv, must.stream().mapToInt(Integer::intValue).toArray()), k))
                            .getContainerResponses(0).getDeviceIDsList();
                    List<Integer> got = answer.stream().map(indexOf::get).toList();
                    String what = profile + " free " + free + " must " + must + " k " + k + " -> " + got;
                    assertThat(got).as(what).hasSize(k).doesNotHaveDuplicates().doesNotContainNull();
                    assertThat(free).as(what).containsAll(got);
                    assertThat(got).as(what).containsAll(must);
                    long best = exactBest(t, free, must, k);
                    assertThat(score(t, got)).as(what).isEqualTo(best);
                    List<Integer> naive = new ArrayList<>(must);
                    free.stream().filter(i -> !must.contains(i)).limit(k - must.size()).forEach(naive::add);
                    naiveWrong += score(t, naive) < best ? 1 : 0;
                }
                // the check bites: in many states the must-include ids plus the first free ones are not the best
                assertThat(naiveWrong).as(profile).isGreaterThan(profile.equals("dgx1-v100") ? 50 : 10);
                assertThat(withMust).isGreaterThan(100);
            }
        }
    }

    /** One case of go-gpuallocator's besteffort_test.go: available, required, size, and its expected answer. */
    record Peer(String name, List<Integer> available, List<Integer> required, int size, List<Integer> expected) {
    }

    /** TestBestEffortAllocate on its DGX-1 Volta node (the hybrid cube-mesh of our dgx1-v100 profile). */
    static final List<Peer> DGX1_POLICY = List.of(
            new Peer("Single NVLINK, prefer same switch", List.of(0, 2, 4, 5), List.of(), 2, List.of(4, 5)),
            new Peer("Single NVLINK, prefer same socket", List.of(0, 4, 5, 6), List.of(), 2, List.of(5, 6)),
            new Peer("Prefer dual NVLINK same socket", List.of(0, 3, 1), List.of(), 2, List.of(0, 3)),
            new Peer("Prefer dual NVLINK cross socket", List.of(0, 1, 4), List.of(), 2, List.of(0, 4)),
            new Peer("Must include with allocation size 1", List.of(0, 1, 2, 3, 4, 5, 6, 7), List.of(4), 1,
                    List.of(4)),
            new Peer("Must include with allocation size 2", List.of(0, 1, 2, 3, 4, 5, 6, 7), List.of(4), 2,
                    List.of(4, 7)),
            new Peer("Must include with allocation size 4", List.of(0, 1, 2, 3, 4, 5, 6, 7), List.of(4), 4,
                    List.of(4, 5, 6, 7)),
            new Peer("Must include with full set specified", List.of(0, 1, 2, 3, 4, 5, 6, 7), List.of(0, 2, 4, 6), 4,
                    List.of(0, 2, 4, 6)));

    /** The cases where go-gpuallocator answers nothing: here a gRPC INVALID_ARGUMENT. */
    static final List<Peer> DGX1_REFUSED = List.of(
            new Peer("Must include with unavailable device", List.of(1, 2, 3, 4, 5, 6, 7), List.of(0, 1, 2, 3), 4,
                    List.of()),
            new Peer("Must include with too many devices specified", List.of(0, 1, 2, 3, 4, 5, 6, 7),
                    List.of(1, 2, 3, 4, 5, 6), 4, List.of()),
            new Peer("Required too many devices than available", List.of(1, 2, 3, 4, 5), List.of(1, 2, 3, 4, 5, 6),
                    1, List.of()));

    /** TestBestEffortDGX1VoltaGPUAlloc{One,Two,Four,Eight}: successive allocations on one node, then nothing left. */
    static final List<List<List<Integer>>> DGX1_SEQUENCES = List.of(
            List.of(List.of(0), List.of(1), List.of(2), List.of(3), List.of(4), List.of(5), List.of(6), List.of(7)),
            List.of(List.of(0, 3), List.of(1, 2), List.of(4, 7), List.of(5, 6)),
            List.of(List.of(0, 1, 2, 3), List.of(4, 5, 6, 7)),
            List.of(List.of(0, 1, 2, 3, 4, 5, 6, 7)));

    @Test
    void goGpuallocatorPeerCasesGetTheSameOrABetterScore() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            DevicePluginGrpc.DevicePluginBlockingStub c = kubelet.client("nvidia.com/gpu");
            GpuTopology t = inv.topology();
            Map<String, Integer> indexOf = new HashMap<>();
            inv.devices().forEach(g -> indexOf.put(g.uuid(), g.index()));
            List<Peer> all = new ArrayList<>(DGX1_POLICY);
            for (List<List<Integer>> seq : DGX1_SEQUENCES) {
                Set<Integer> taken = new HashSet<>();
                for (List<Integer> step : seq) {
                    List<Integer> avail = new ArrayList<>();
                    for (int i = 0; i < 8; i++) {
                        if (!taken.contains(i)) {
                            avail.add(i);
                        }
                    }
                    all.add(new Peer("sequence of " + step.size() + ": " + step, avail, List.of(), step.size(), step));
                    taken.addAll(step);
                }
                // then one more GPU on a full node: go-gpuallocator answers nothing, we answer INVALID_ARGUMENT
                assertThatThrownBy(() -> c.getPreferredAllocation(preferred(List.of(), List.of(), 1)))
                        .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT));
            }
            int better = 0;
            for (Peer p : all) {
                List<Integer> got = c.getPreferredAllocation(preferred(ids(inv, toArray(p.available())),
                        ids(inv, toArray(p.required())), p.size())).getContainerResponses(0).getDeviceIDsList()
                        .stream().map(indexOf::get).toList();
                assertThat(got).as(p.name()).hasSize(p.size()).containsAll(p.required());
                assertThat(p.available()).as(p.name()).containsAll(got);
                assertThat(score(t, got)).as(p.name() + ": ours " + got + ", go-gpuallocator " + p.expected())
                        .isGreaterThanOrEqualTo(score(t, p.expected()));
                better += score(t, got) > score(t, p.expected()) ? 1 : 0;
            }
            // "Single NVLINK, prefer same switch": go-gpuallocator keeps [0,2] for later and gives [4,5] (150);
            // the SET objective gives the double-NVLink pair [0,4] (210)
            assertThat(better).isGreaterThanOrEqualTo(1);
            for (Peer p : DGX1_REFUSED) {
                assertThatThrownBy(() -> c.getPreferredAllocation(preferred(ids(inv, toArray(p.available())),
                        ids(inv, toArray(p.required())), p.size()))).as(p.name())
                        .satisfies(e -> assertThat(status(e)).isEqualTo(Status.Code.INVALID_ARGUMENT));
            }
        }
    }

    @Test
    void goGpuallocatorBestPartitionCaseOn14Gpus() throws Exception {
        // TestBestEffortAllocateRetainsBestPartition: 7 NVLink pairs, the last with 4 links; a pair of 2 -> [12, 13]
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("fourteen");
        for (int i = 0; i < 14; i++) {
            b.device(GpuDevice.builder().index(i).uuid(String.format("GPU-%08d-0000-0000-0000-000000000000", i))
                    .vendor(GpuVendor.NVIDIA).name("Test GPU").memory(MemorySize.parse("16GB"))
                    .pciBusId(String.format("00000000:%02X:00.0", i + 1)).minor(i).build());
        }
        for (int i = 0; i < 12; i += 2) {
            b.links(i, i + 1, 2);
        }
        b.links(12, 13, 4);
        try (SimulatedGpuInventory inv = b.build();
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            List<String> all = ids(inv, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13);
            assertThat(kubelet.client("nvidia.com/gpu").getPreferredAllocation(preferred(all, List.of(), 2))
                    .getContainerResponses(0).getDeviceIDsList()).containsExactlyInAnyOrder(all.get(12), all.get(13));
        }
    }

    @Test
    void oneAnswerPerContainerRequest() throws Exception {
        try (SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
             KubeletStandIn kubelet = new KubeletStandIn(kubeletDir(dir));
             KubeletDevicePlugin plugin = KubeletDevicePlugin.start(inv, config(dir).build())) {
            kubelet.awaitRegistration(1);
            List<String> all = ids(inv, 0, 1, 2, 3, 4, 5, 6, 7);
            PreferredAllocationRequest.Builder r = PreferredAllocationRequest.newBuilder();
            for (int k = 1; k <= 4; k++) {
                r.addContainerRequests(ContainerPreferredAllocationRequest.newBuilder().addAllAvailableDeviceIDs(all)
                        .setAllocationSize(k));
            }
            PreferredAllocationResponse p = kubelet.client("nvidia.com/gpu").getPreferredAllocation(r.build());
            assertThat(p.getContainerResponsesCount()).isEqualTo(4);
            for (int k = 1; k <= 4; k++) {
                assertThat(p.getContainerResponses(k - 1).getDeviceIDsCount()).isEqualTo(k);
            }
        }
    }

    private static int[] toArray(List<Integer> l) {
        return l.stream().mapToInt(Integer::intValue).toArray();
    }
}
