package io.gpusched.service.adversarial.review15;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review15, an interrupted stop (StopGate.awaitChanges and Jobs.close now wait through an interrupt and re-assert it):
 * the stop goes on with the thread's interrupt set, and LoginFences.close (revoke, then the record
 * {@code <state>/login-fences} rewritten with Files.writeString) runs on that thread. The login cgroups must be back
 * to the host's policy, the record must say nothing is fenced, and the caller must see its interrupt still set.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class InterruptedStopRevokesLoginFencesTest {

    @Test
    void anInterruptedStopRevokesTheLoginFencesAndSaysSo(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(1))).jobs()) {
            Path login = bed.cgroup("login");
            GpuConfig fenced = GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                    .withAdminGroup("gsu-nonexistent").withLoginCgroups(List.of(login)).withKillGrace(Duration
                            .ofSeconds(1)))
                    .build();
            NodeService s = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state).jobs(
                    bed.launcher, null).isolator(bed.isolator).build().start();
            bed.service = s;
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Process attached = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/bin/sh", "-c", "trap '' TERM; while :; do sleep 0.05; done")));
            try {
                Clients.awaitRunning(s, 60);
                assertThat(bed.loginProbe(login)).as("the login is fenced while the service runs").contains("EPERM");
                Path record = bed.state.resolve("login-fences");
                assertThat(record).as("the record of fenced logins").exists();
                boolean after;
                Thread.currentThread().interrupt(); // e.g. a host's shutdown thread that was interrupted
                try {
                    s.stop();
                } finally {
                    after = Thread.interrupted();
                }
                String probe = bed.loginProbe(login);
                String listed = Files.exists(record) ? Files.readString(record) : "";
                System.out.printf("review15 interrupted stop: interrupt after %s; probe %s; record [%s]%n", after,
                        probe.replace('\n', ' '), listed.strip());
                assertThat(after).as("the caller's interrupt after stop() returned").isTrue();
                assertThat(probe).as("the login cgroup after an interrupted stop (the fence should be revoked)")
                        .doesNotContain("EPERM");
                assertThat(listed).as("%s after an interrupted stop revoked every fence", record)
                        .doesNotContain(login.toString());
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroups after the stop").isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, attached);
            }
        }
    }
}
