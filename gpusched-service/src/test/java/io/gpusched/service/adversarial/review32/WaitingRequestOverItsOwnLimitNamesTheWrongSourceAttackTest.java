package io.gpusched.service.adversarial.review32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
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
 * Review32: a waiting request larger than its owner's limit is refused at once by FairQueue.enqueue with its own text,
 * "... may hold at most 2 GPU(s) at once (gpu.users)", whatever the limit's source; the same request without a wait
 * goes to the scheduler, whose refusal names the source (UserQuotas.Limit.source: "gpu.users.per_user.alice"). SERVICE.md:
 * refused "naming the limit, where it comes from". alice's limit of 2 is her per-user override (no node-wide limit):
 * with --wait she is told of a node-wide gpu.users limit that does not exist.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class WaitingRequestOverItsOwnLimitNamesTheWrongSourceAttackTest {

    @Test
    void aWaitingRequestOverItsOwnersLimitNamesWhereTheLimitComesFrom(@TempDir Path tmp) throws Exception {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of("gsu-alice", 2), Map.of())).service(
                ServiceSettings.defaults().withAdminGroup("gsu-nonexistent").withKillGrace(Duration.ofMillis(300)))
                .build();
        try (ServiceBed bed = new ServiceBed(tmp, config)) {
            NodeService s = bed.start();
            Caller alice = ServiceBed.caller("gsu-alice", 63241, false);
            Throwable now = catchThrowable(() -> s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=3")),
                    Optional.empty(), () -> false));
            Throwable waiting = catchThrowable(() -> s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=3")),
                    Optional.of(Duration.ofSeconds(10)), () -> false));
            assertThat(waiting).isInstanceOf(GpuAllocationException.class);
            assertThat(((GpuAllocationException) waiting).reason()).isEqualTo(Reason.INVALID_REQUEST);
            assertThat(waiting.getMessage()).as("3 GPUs with --wait, alice's limit 2 from gpu.users.per_user (the same"
                    + " request without a wait was told: %s)", now == null ? null : now.getMessage()).contains(
                            "gpu.users.per_user.gsu-alice");
        }
    }
}
