package io.gpusched.service.adversarial.review12;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * stop() is public now and "refuses every change from then on"; close() runs stop() only "if not done". A service
 * stopped before it was started (an embedder's stop on an early shutdown, racing its start) must not end up fencing
 * the logins with nothing left to take the fence off: after close(), the login cgroup must open the GPUs again.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StartAfterStopAttackTest {

    @Test
    void aServiceStoppedBeforeItsStartLeavesNoLoginFenceAfterClose(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build()).jobs()) {
            Path login = bed.cgroup("login");
            GpuConfig fenced = GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                    .withLoginCgroups(List.of(login)).withKillGrace(Duration.ofMillis(300))).build();
            assertThat(bed.loginProbe(login)).as("before: the login opens every node").doesNotContain("EPERM");
            NodeService s = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state).jobs(
                    bed.launcher, null).isolator(bed.isolator).build();
            s.stop();
            RuntimeException refused = null;
            try {
                s.start();
            } catch (RuntimeException e) {
                refused = e; // refusing the start of a stopped service is a fine answer
            }
            String whileStarted = bed.loginProbe(login);
            s.close();
            String afterClose = bed.loginProbe(login);
            assertThat(afterClose).as("the login cgroup after close() of a service stopped before its start (start %s;"
                    + " while it was 'started': %s)", refused == null ? "accepted" : "refused: " + refused,
                    whileStarted.replace('\n', ' ')).doesNotContain("EPERM");
        }
    }
}
