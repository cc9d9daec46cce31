package io.gpusched.core.strategy;

import io.gpusched.core.GpuRequest;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;

/**
 * Test-side entry to the package-private {@link PlacementSearch} for tests in other packages (the adversarial corpora),
 * so no test reaches it by reflection (issue 22). Only for proving what a corpus exercises, never to judge an answer.
 */
public final class SearchProbe {

    private SearchProbe() {
    }

    /**
     * @return search nodes the branch and bound visits for an exclusive request with no NUMA preference (pool =
     *         candidates, no budget, the greedy start without local search)
     */
    public static int branchAndBoundNodes(Objective o, GpuRequest req, SchedulingView v) {
        PlacementSearch s = new PlacementSearch(new TopologyScores(v.topology()), v.candidates(),
                req.requiredDevices(), v.devices(), req.count(), o);
        s.run();
        return s.nodesVisited();
    }
}
