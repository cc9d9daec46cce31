package io.gpusched.service.adversarial.review37;

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
 * Review37: since 52e79fe7 CallerResolver names a user whose NSS name is outside UserQuotas.validName (a space) by
 * its uid, "63739", with its uid's groups; a uid NSS does not know is "63739" too. A user whose NSS name IS "63739"
 * (numeric user names: student ids; useradd --badname makes one) is named "63739" by the same resolver, with another
 * uid. UserDirectory keys its cache and its new `callers` map by name only and never asks NSS about a number, so the
 * two share one entry: whoever connected last sets the groups the other's quota is judged by. Here ann (uid 63739,
 * named by uid, a member of gsg-lim37, limit 1) holds 1 GPU and waits for a second; the user named "63739" (uid 63791,
 * not a member) makes one call; ann's waiting request is then judged with his groups and granted: she holds 2 of a
 * limit of 1. Issue 33: no one ever holds more than their quota; identity from the kernel, never from a name.
 * (The callers below are what CallerResolver makes of those two accounts; UserDirectory asks NSS nothing for them.)
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UidNamedCallerJudgedByTheGroupsOfAUserNamedByTheSameNumberAttackTest {

    @Test
    void aGroupsLimitHoldsForAUidNamedCallerWhenAUserNamedByThatNumberConnects(@TempDir Path tmp)
            throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(), Map.of("gsg-lim37", 1)))
                .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                        .withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller ann = ServiceBed.caller("63739", 63739, false, "gsg-lim37"); // "ann smith": named by her uid
            Caller num = ServiceBed.caller("63739", 63791, false, "63739"); // NSS name "63739", uid 63791
            Allocation first = s.allocate(ann, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                    () -> false);
            Throwable second = catchThrowable(() -> s.allocate(ann, GpuRequests.fromCliFlags(List.of("--gpu=1")),
                    Optional.empty(), () -> false));
            assertThat(second).as("control: ann's second GPU at once, over gsg-lim37's limit of 1")
                    .isInstanceOf(GpuAllocationException.class);
            try (Queued waiting = Queued.queue(s, ann, Duration.ofSeconds(30), "--gpu=1")) {
                Thread.sleep(1000); // the pass that queued it refuses it for her quota
                Allocation his = s.allocate(num, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false); // the other "63739" makes one call (a change on the node too)
                s.release(num, his.id());
                Clients.await(waiting.result::isDone, 45);
                long held = s.scheduler().allocations().stream()
                        .filter(a -> a.request().ownerUid().orElse(-1) == 63739)
                        .mapToLong(a -> a.deviceIndices().size()).sum();
                assertThat(held).as("GPUs held by uid 63739 (a member of gsg-lim37, limit 1) after the user named"
                        + " \"63739\" (uid 63791) made one call; her waiting request: %s", waiting.result)
                        .isLessThanOrEqualTo(1);
            } finally {
                s.release(ann, first.id());
            }
        }
    }
}
