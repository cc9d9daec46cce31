package io.gpusched.service.adversarial.jobprocess;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.file.Path;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link NodeService#allocate}: "a request to the node service may not name a holder process, a job cgroup or an
 * owner uid: the service sets them". Issue 36 added a fourth field a reclaim acts on as root, the job process
 * ({@link GpuRequest#jobProcess()}: SIGKILLed by a reclaim or an ending lease while its start time matches); the
 * guard was not extended to it, so a caller's request that names a process of root's is granted with that record,
 * and the service's own reclaim would kill it for the caller.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class ServiceRequestJobProcessAttackTest {

    @Test
    void aRequestNamingAJobProcessIsRefusedAsAHolderOrCgroupIs(@TempDir Path tmp) throws Exception {
        Process roots = new ProcessBuilder("sleep", "120").start();
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            NodeService s = bed.start();
            Caller eve = ServiceBed.caller("gsu-eve", 61009, false);
            GpuRequest forged = GpuRequest.builder().count(1).jobProcess(HolderProcess.of(roots.pid())).build();
            assertThatThrownBy(() -> s.allocate(eve, forged, Optional.empty(), () -> false))
                    .as("a request naming root's process pid %d as its job", roots.pid())
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("the service sets");
            assertThat(s.scheduler().allocations()).as("nothing granted").isEmpty();
        } finally {
            roots.destroyForcibly();
        }
    }
}
