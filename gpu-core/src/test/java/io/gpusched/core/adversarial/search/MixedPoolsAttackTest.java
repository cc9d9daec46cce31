package io.gpusched.core.adversarial.search;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.MemorySize;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Twins (partitions of one GPU) with many GPUs, so the branch and bound rather than the block search runs (more than
 * 20,000 splits, or twin classes that mix free and shared GPUs), with the tighter bound's capacities, own-class
 * partners and lower bounds (required devices) in play: exclusive requests on fragmented nodes, and shared requests
 * on nodes with fewer shared GPUs than asked (the pool mixes free and shared partitions of one GPU).
 */
class MixedPoolsAttackTest {

    enum State { FREE, HELD, SHARED }

    record Node(List<GpuDevice> devices, GpuTopology topology) {
    }

    /**
     * g GPUs of p partitions: partitions of one GPU 0 or 1 link and INTERNAL PCIe (a twin class); between GPUs 0 to 3
     * links and a random PCIe level (scores close to the twins', so the search is long).
     */
    static Node node(Random r, int g, int p) {
        List<GpuDevice> devs = new ArrayList<>();
        int n = g * p;
        for (int i = 0; i < n; i++) {
            devs.add(SearchOracle.device(i, (i / p) * 2 / g));
        }
        GpuTopology.Builder b = GpuTopology.builder(devs);
        PcieLevel[] levels = PcieLevel.values();
        int intraMax = r.nextInt(2);
        int[][] links = new int[g][g];
        PcieLevel[][] pcie = new PcieLevel[g][g];
        for (int x = 0; x < g; x++) {
            for (int y = x; y < g; y++) {
                links[x][y] = x == y ? r.nextInt(intraMax + 1) : r.nextInt(4);
                pcie[x][y] = x == y ? PcieLevel.INTERNAL : levels[1 + r.nextInt(levels.length - 1)];
            }
        }
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                int x = i / p;
                int y = j / p;
                if (links[x][y] > 0) {
                    b.links(i, j, links[x][y]);
                }
                b.pcie(i, j, pcie[x][y]);
            }
        }
        return new Node(devs, b.build());
    }

    static int[] corpus(Objective o, long seed, int tries, boolean sharedRequests, boolean stayFree) {
        Random r = new Random(seed);
        int done = 0;
        int past = 0;
        List<Callable<Integer>> work = new ArrayList<>();
        while (done < tries) {
            int p = 2;
            int g = 14 + r.nextInt(2);
            Node node = node(r, g, p);
            int k = 8 + r.nextInt(2);
            List<DeviceState> all = new ArrayList<>();
            List<DeviceState> cands = new ArrayList<>();
            int sharedLeft = sharedRequests ? 1 + r.nextInt(k - 1) : 0;
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < g * p; i++) {
                order.add(i);
            }
            Collections.shuffle(order, r);
            State[] st = new State[g * p];
            int heldLeft = r.nextInt(4);
            for (int i : order) {
                if (sharedLeft > 0) {
                    st[i] = State.SHARED;
                    sharedLeft--;
                } else if (heldLeft > 0) {
                    st[i] = State.HELD;
                    heldLeft--;
                } else {
                    st[i] = State.FREE;
                }
            }
            for (GpuDevice d : node.devices()) {
                DeviceState s = switch (st[d.index()]) {
                    case FREE -> DeviceState.idle(d, GpuHealth.HEALTHY);
                    case HELD -> SearchOracle.held(d);
                    case SHARED -> SearchOracle.shared(d);
                };
                all.add(s);
                if (s.exclusiveHolder().isEmpty() && (sharedRequests || s.sharedHolders() == 0)) {
                    cands.add(s);
                }
            }
            if (cands.size() < k || TightBoundAttackTest.choose(cands.size(), k) > 8_000_000) {
                continue;
            }
            List<Integer> candIds = new ArrayList<>(cands.stream().map(DeviceState::index).toList());
            Collections.shuffle(candIds, r);
            int req = r.nextInt(2);
            GpuRequest.Builder rb = GpuRequest.builder().count(k).requiredDevices(candIds.subList(0, Math.min(req, k)));
            if (sharedRequests) {
                rb.shared(MemorySize.ofGibibytes(1));
            }
            GpuRequest request = rb.build();
            SchedulingView v = SearchOracle.view(all, cands, node.topology());
            String name = (sharedRequests ? "shared" : "exclusive") + " seed " + seed + " try " + done;
            work.add(() -> {
                TightBoundAttackTest.judge(name, o, request, v, stayFree);
                return SearchOracle.searchNodes(sharedRequests ? Objective.SET : o, request, v);
            });
            done++;
        }
        // the tries are drawn above, one after another from the seed; judged here two at a time
        for (int nodes : SearchOracle.atOnce(work)) {
            if (nodes > 2_048) {
                past++;
            }
        }
        return new int[]{done, past};
    }

    @ParameterizedTest
    @EnumSource(Objective.class)
    void exclusiveOnFragmentedPartitionNodes(Objective o) {
        int[] res = corpus(o, 1701L + o.ordinal(), 40, false, true);
        TightBoundAttackTest.report("partitions exclusive", o, res);
        assertTrue(res[1] < 0 || res[1] >= res[0] / 10, "too few searches past 2,048 nodes: " + res[1]);
    }

    /**
     * The same corpus judged with the Javadoc's words: "least affinity to the GPUs that stay free". Failed on seed 1802
     * try 0 (the REMAINING instance; a shared request always uses SET; k=9, GPUs 3 and 4 shared) before the pair
     * weights of the affinity key counted only the set's free ends: answer [2, 3, 18, 19, 20, 21, 22, 24, 25], set
     * score 9,340, affinity to what stays free 20,340; [2, 18, 19, 20, 21, 22, 23, 24, 25] scores the same with
     * affinity 18,830. TieBreakAttackTest#sharedSetMixingSharedAndFreeTieBreaksByWhatStaysFree is the 4-GPU case.
     */
    @ParameterizedTest
    @EnumSource(Objective.class)
    void sharedMixedPoolsStayFreeReading(Objective o) {
        int[] res = corpus(o, 1801L + o.ordinal(), 40, true, true);
        TightBoundAttackTest.report("partitions shared (stay-free affinity)", o, res);
    }
}
