package io.gpusched.accounting.adversarial.review38;

import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.IdleEffects;
import io.gpusched.accounting.IdleNotice;
import io.gpusched.accounting.IdleStep;
import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import io.gpusched.core.Allocation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Puts on an {@link AccountingNode} a sampler whose idle effects signal successfully (as HostIdleEffects does for a
 * job cgroup whose processes take the signal, e.g. a job that checkpoints on SIGUSR1 and goes on), without processes.
 */
final class SignallingNode {
    private SignallingNode() {
    }

    /** What the effects were asked to do. */
    static final class Effects implements IdleEffects {
        final List<IdleNotice> notices = new ArrayList<>();
        final List<String> signalled = new ArrayList<>();

        @Override
        public void notify(Allocation a, IdleStep step, Duration idleFor, String message) {
            notices.add(new IdleNotice(a.id(), a.owner(), a.deviceIndices(), step, idleFor, message));
        }

        @Override
        public String release(Allocation a) {
            throw new IllegalStateException("not released in this test");
        }

        @Override
        public String signal(Allocation a, String signal) {
            signalled.add(a.id());
            return "sent SIG" + signal + " to the 1 process(es) of job cgroup /sys/fs/cgroup/job-" + a.id();
        }

        @Override
        public String runHook(Allocation a, List<String> argv) {
            return "not run";
        }
    }

    /** Replaces the node's sampler by one with {@code effects}, before anything is allocated. */
    static void install(AccountingNode node, Effects effects) {
        node.stopSampler();
        AccountingSampler s = AccountingSampler.open(node.store, node.settings, node.inventory, node.attribution,
                effects, node.clock).orElseThrow();
        node.scheduler.addListener(s);
        s.knownLive(node.scheduler.allocations());
        node.sampler = s;
    }
}
