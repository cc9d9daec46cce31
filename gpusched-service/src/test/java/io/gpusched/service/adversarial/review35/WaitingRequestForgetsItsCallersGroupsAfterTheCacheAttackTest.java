package io.gpusched.service.adversarial.review35;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.service.adversarial.review10.Queued;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review35: the groups a per-group quota goes by are the caller's own (what the kernel and NSS gave the connection,
 * UserDirectory.remember) for only 10 s; after that the directory looks the name up again through `id NAME`, and a
 * look-up that fails answers "no groups", which drops the group's limit. A waiting request outlives the 10 s, and is
 * judged on every pass by DefaultGpuScheduler.quotaOf -> UserDirectory.groupsOf(name). Whenever NSS resolves the
 * caller's uid but not their name as the service passes it (a non-ASCII name under the unit's locale:
 * NonAsciiUserLosesItsGroupsUnderTheServicesLocaleAttackTest; here a caller made by hand, whom NSS does not know by
 * name), a member of a group limited to 1 GPU is refused her second at once but is granted it by the queue once her
 * waiting request is older than 10 s. The class's promise: a failed look-up "never grants anything"; issue 33: no one
 * ever holds more than their quota.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class WaitingRequestForgetsItsCallersGroupsAfterTheCacheAttackTest {

    @Test
    void aGroupsLimitHoldsForARequestThatWaitsLongerThanTheCache(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(), Map.of("gsg-ttl35", 1)))
                .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                        .withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller zoe = ServiceBed.caller("gsu-zo\u00eb35", 63533, false, "gsu-zo\u00eb35", "gsg-ttl35");
            Caller bob = ServiceBed.caller("gsu-bob35", 63534, false, "gsu-bob35");
            Allocation first = s.allocate(zoe, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            Throwable second = catchThrowable(() -> s.allocate(zoe, GpuRequests.fromCliFlags(List.of("--gpu=1")),
                    Optional.empty(), () -> false));
            assertThat(second).as("control: her second GPU at once, over gsg-ttl35's limit of 1").isInstanceOf(
                    GpuAllocationException.class);
            try (Queued waiting = Queued.queue(s, zoe, Duration.ofSeconds(40), "--gpu=1")) {
                Thread.sleep(12_000); // past UserDirectory.TTL_SECONDS (10 s) since her last call
                Allocation bobs = s.allocate(bob, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false); // a change on the node: the queue tries her request again
                s.release(bob, bobs.id());
                Clients.await(waiting.result::isDone, 20);
                long held = s.scheduler().allocations().stream()
                        .filter(a -> a.request().ownerUid().orElse(-1) == 63533)
                        .mapToLong(a -> a.deviceIndices().size()).sum();
                assertThat(held).as("GPUs held by gsu-zo\u00eb35, a member of gsg-ttl35 (limit 1), after her request"
                        + " waited 12 s: %s", waiting.result).isLessThanOrEqualTo(1);
            } finally {
                s.release(zoe, first.id());
            }
        }
    }
}
