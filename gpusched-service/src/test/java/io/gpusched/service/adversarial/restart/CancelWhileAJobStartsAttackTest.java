package io.gpusched.service.adversarial.restart;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A user's {@code cancel} racing the launch of their job. docs/SERVICE.md: {@code DELETE /api/v1/jobs/{id}} cancels
 * (TERM, KILL after the grace period) and answers the job view; {@code Jobs.cancel} says "answered once its GPUs are
 * released: a cancelled job's GPUs are free when it returns". It reads the job's {@code launched} once, before the
 * launch has set it, and then waits only for {@code ended}: the driver ends the job (end() completes {@code ended})
 * and releases the allocation after, in its finally block. So a cancel that lands while the job is allocated and being
 * launched returns with the job CANCELLED and its allocation still live in the node ledger.
 *
 * <p>Each round starts a detached job, waits (polling) until it is allocated and not yet launched, cancels it in
 * this JVM (the route's own call, so no curl round trip hides the gap) and, as soon as the cancel returns, reads the
 * node ledger's file ({@link LedgerReader}, no lock) for the job's allocation. A round that did not catch the window
 * is not counted.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class CancelWhileAJobStartsAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int ROUNDS = 12;

    @Test
    void aCancelAnsweredDuringTheLaunchLeavesNoAllocationHeld(@TempDir Path tmp) throws Exception {
        GpuConfig config = Restarts.config(Duration.ofMillis(300));
        try (ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Caller asAlice = ServiceBed.caller(alice, false);
            Path home = Restarts.homeOf(tmp, alice);
            String body = "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sleep\",\"600\"],\"env\":{\"PATH\":"
                    + "\"/usr/bin:/bin\"},\"cwd\":" + JSON.writeValueAsString(home.toString()) + ",\"detach\":true}";
            Method cancel = NodeService.class.getDeclaredMethod("cancelJob", Caller.class, String.class);
            cancel.setAccessible(true);
            Caller root = ServiceBed.root();
            List<String> heldAfterCancel = new ArrayList<>();
            int caught = 0;
            for (int round = 0; round < ROUNDS; round++) {
                Thread submit = new Thread(() -> {
                    try {
                        bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body,
                                "http://localhost/api/v1/jobs");
                    } catch (Exception e) {
                        // what matters is what the cancel left
                    }
                }, "submit-" + round);
                submit.start();
                String id = null;
                String allocation = null;
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (id == null && submit.isAlive() && System.nanoTime() < until) {
                    for (Map<String, Object> j : s.jobViews(root)) {
                        if (j.get("allocationId") != null && j.get("cgroup") == null
                                && "QUEUED".equals(j.get("state"))) {
                            id = (String) j.get("id"); // allocated, being launched
                            allocation = (String) j.get("allocationId");
                        }
                    }
                }
                if (id != null) {
                    try {
                        cancel.invoke(s, asAlice, id);
                    } catch (InvocationTargetException e) {
                        throw new AssertionError("cancelling " + id + " failed", e.getCause());
                    }
                    // the ledger file as it is now (no lock: a release under way is not waited for)
                    boolean live = LedgerReader.read(bed.state).live.containsKey(allocation);
                    caught++;
                    if (live) {
                        heldAfterCancel.add("job " + id + ": allocation " + allocation);
                    }
                }
                submit.join(TimeUnit.SECONDS.toMillis(90));
                for (Map<String, Object> j : s.jobViews(root)) { // a round that missed the window: its job runs
                    if ("RUNNING".equals(j.get("state")) || "QUEUED".equals(j.get("state"))) {
                        cancel.invoke(s, asAlice, j.get("id"));
                    }
                }
                awaitNoLiveJobAllocation(bed);
            }
            assertThat(caught).as("rounds whose cancel landed while the job was being launched").isPositive();
            assertThat(heldAfterCancel).as("allocations still live in the node ledger when the cancel returned (%d"
                    + " of %d cancels that landed during the launch)", heldAfterCancel.size(), caught).isEmpty();
        }
    }

    /** Between rounds: the previous job's allocation released (polled), so every round starts from a free node. */
    private static void awaitNoLiveJobAllocation(ServiceBed bed) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < until && bed.scheduler.allocations().stream()
                .anyMatch(x -> x.request().jobId().isPresent())) {
            Thread.sleep(20);
        }
    }
}
