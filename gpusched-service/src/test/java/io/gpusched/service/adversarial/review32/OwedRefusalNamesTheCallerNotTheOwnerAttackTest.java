package io.gpusched.service.adversarial.review32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review32: since 9be07280 a waiting request is its OWNER's (turns, the per-owner queue view: "the queue's view names
 * the owner"), but the refusal of a request short of GPUs kept for it (FairQueue.owed) still names the request's
 * CALLER: an admin's waiting request for bob makes alice's request refused with "root (uid 0) waits for 4 GPUs ...
 * (GET /api/v1/queue lists them)", while that list shows only bob's request: the refusal names a waiter the queue
 * does not have, and not the user whose request it is.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class OwedRefusalNamesTheCallerNotTheOwnerAttackTest {

    @Test
    void aRefusalShortOfGpusKeptForAnAdminsRequestForBobNamesBob(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.User bob = bed.accounts.user("bob");
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            Caller carol = ServiceBed.caller("gsu-carol", 63253, false);
            Caller alice = ServiceBed.caller("gsu-alice", 63251, false);
            Allocation six = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=6")), Optional.empty(),
                    () -> false);
            try (Queued forBob = Queued.queue(s, root, "--gpu=4", "--owner=" + bob.name())) {
                assertThat(forBob.result).as("the admin's 4-GPU request for bob waits (2 free)").isNotDone();
                assertThat(s.queueView().toString()).as("the queue's view names the owner").contains(bob.name());
                Throwable why = catchThrowable(() -> s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=1")),
                        Optional.empty(), () -> false));
                assertThat(why).as("alice's 1 GPU without a wait, the 2 free GPUs kept for bob's request").isInstanceOf(
                        GpuAllocationException.class);
                assertThat(((GpuAllocationException) why).reason()).isEqualTo(Reason.INSUFFICIENT_GPUS);
                assertThat(why.getMessage()).as("the refusal names the request ahead as GET /api/v1/queue does: by its"
                        + " owner, %s (queue: %s)", bob.name(), s.queueView()).contains(bob.name());
            } finally {
                s.release(carol, six.id());
            }
        }
    }
}
