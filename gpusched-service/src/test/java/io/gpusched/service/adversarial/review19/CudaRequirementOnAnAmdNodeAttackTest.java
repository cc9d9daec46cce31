package io.gpusched.service.adversarial.review19;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review19: a FALSE refusal from the cuda pre-check (a5a92225, Jobs.prepare: CudaEnvironmentResolver.checkInstalled).
 * On an AMD node a job's {@code cuda} requirement "does not apply to AMD GPUs and was ignored"
 * (CudaEnvironmentResolver.amd, what resolve does once the GPUs are granted), so a job script shared between a
 * cluster's NVIDIA and AMD nodes runs on both. The pre-check, made before the vendor of the GPUs is known, asks the
 * host's CUDA installations instead: on an AMD node (mi210-8x here; this host's only CUDA is 13.0) the same job is
 * refused 409 NO_MATCHING_CUDA, though it would run.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CudaRequirementOnAnAmdNodeAttackTest {

    @Test
    void aCudaRequirementIsNotARefusalOnANodeWhoseGpusAreAllAmd(@TempDir Path tmp) throws Exception {
        GpuConfig config = Clients.config(Duration.ofMillis(300));
        Path amdState = tmp.resolve("amd-state");
        try (GpuScheduler amd = GpuScheduler.builder().inventory(GpuInventories.simulated("mi210-8x")).stateDir(
                amdState).config(config).auditLogging(false).build();
             ServiceBed bed = new ServiceBed(tmp, config).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            bed.service = NodeService.builder().scheduler(amd).config(config).stateDir(config.service().privateDir(
                    amdState)).users(bed.users).jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            bed.serve();
            Map<String, Object> m = Clients.jobRequest(Clients.homeOf(tmp, alice), List.of("/bin/true"), "--gpu=1");
            m.put("cuda", "9.0");
            m.put("detach", true);
            Answer a = bed.post(alice, "/api/v1/jobs", Clients.JSON.writeValueAsString(m));
            assertThat(a.body()).as("the answer (%d) to alice's job with \"cuda\": \"9.0\" on an all-AMD node",
                    a.status()).doesNotContain("NO_MATCHING_CUDA");
        }
    }
}
