package io.gpusched.service.adversarial.review17;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review17: a job's {@code "cuda"} field is the one part of a job's request that is checked only after its GPUs were
 * granted. docs/SERVICE.md (Jobs): "The service checks the request (400 naming the field) and, as the caller, that the
 * working directory can be entered ..., then allocates". {@code Requests.job} checks only that {@code cuda} is a
 * string of at most 64 characters; {@code CudaRequirement.parse} runs in {@code Jobs.run}, after
 * {@code Jobs.allocate} (the fair queue) granted the job its GPUs. So a malformed requirement takes GPUs (and a turn of
 * the fair queue) before it is refused, and a detached job with one is answered {@code 201}, failing later.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CudaRequirementCheckedAfterTheGrantAttackTest {

    private static String body(Path cwd, boolean detach) throws Exception {
        Map<String, Object> m = Clients.jobRequest(cwd, List.of("/bin/true"), "--gpu=1");
        m.put("cuda", "banana");
        m.put("detach", detach);
        return Clients.JSON.writeValueAsString(m);
    }

    private static List<String> allocatedFor(List<AllocationEvent> events, String user) {
        return events.stream().filter(e -> e.type() == AllocationEvent.Type.ALLOCATED && e.owner().filter(
                user::equals).isPresent()).map(e -> e.allocationId().orElse("?") + " " + e.deviceUuids()).toList();
    }

    @Test
    void aDetachedJobWithAMalformedCudaRequirementIsRefusedWith400BeforeAnythingIsAllocated(@TempDir Path tmp)
            throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            List<AllocationEvent> events = new CopyOnWriteArrayList<>();
            AllocationListener l = events::add;
            bed.scheduler.addListener(l);
            bed.start();
            bed.serve();
            Answer a = bed.post(alice, "/api/v1/jobs", body(Clients.homeOf(tmp, alice), true));
            String jobs = Clients.JSON.writeValueAsString(bed.service.jobViews(ServiceBed.root()));
            assertThat(a.status()).as("answer to a detached job whose \"cuda\" is \"banana\": %s%nallocated for alice"
                    + " meanwhile: %s%njobs: %s", a.body(), allocatedFor(events, alice.name()), jobs).isEqualTo(400);
            assertThat(a.body()).contains("cuda");
            assertThat(allocatedFor(events, alice.name())).as("GPUs granted to a request refused as invalid")
                    .isEmpty();
        }
    }

    @Test
    void anAttachedJobWithAMalformedCudaRequirementIsRefusedWithoutTakingGpus(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            List<AllocationEvent> events = new CopyOnWriteArrayList<>();
            AllocationListener l = events::add;
            bed.scheduler.addListener(l);
            bed.start();
            bed.serve();
            Answer a = bed.post(alice, "/api/v1/jobs", body(Clients.homeOf(tmp, alice), false));
            // listeners are told after the transaction: give a grant's event the time to arrive
            Thread.sleep(500);
            assertThat(allocatedFor(events, alice.name())).as("GPUs granted (and a turn of the fair queue taken) for"
                    + " a job whose \"cuda\" field is malformed, which docs/SERVICE.md says is checked (400) before"
                    + " anything is allocated; the job's answer: %d [%s]", a.status(), a.body()).isEmpty();
            assertThat(a.status()).as("the job's answer: [%s]", a.body()).isEqualTo(400);
            assertThat(a.body()).contains("cuda");
        }
    }
}
