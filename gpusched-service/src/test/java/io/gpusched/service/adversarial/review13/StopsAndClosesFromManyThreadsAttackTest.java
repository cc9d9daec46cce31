package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A service with everything in flight (an attached job, a detached job, a waiting request, a fenced login cgroup) is
 * stopped and closed from several threads at once, in the orders an embedder might (stop + close racing, close
 * without stop racing close): each must end clean (docs/SERVICE.md, Restarts; NodeService.stop/close): no call
 * throws, the login fence is off, no job cgroup is left, no thread named gpusched-* of the service is left, and a new
 * service starts on the same state directory.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class StopsAndClosesFromManyThreadsAttackTest {

    @Test
    void stopsAndClosesRacingEachOtherEndClean(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(2))).jobs()) {
            Path login = bed.cgroup("login");
            GpuConfig fenced = GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults()
                    .withAdminGroup("gsu-nonexistent").withLoginCgroups(List.of(login)).withKillGrace(Duration
                            .ofSeconds(2)))
                    .build();
            List<String> before = Clients.threads("gpusched-");
            NodeService s = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state).jobs(
                    bed.launcher, null).isolator(bed.isolator).build().start();
            bed.service = s;
            bed.serve();
            assertThat(bed.loginProbe(login)).as("the login is fenced while the service runs").contains("EPERM");
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Process attached = Clients.attached(bed, alice, Clients.jobBody(home, List.of("/bin/sh", "-c",
                    "trap '' TERM; while :; do echo tick; sleep 0.05; done")));
            ServiceBed.Answer detached = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", Clients.detachedBody(home, List.of("/bin/sh", "-c", "trap '' TERM; exec sleep"
                            + " 600")),
                    "http://localhost/api/v1/jobs");
            assertThat(detached.status()).as("detached job: %s", detached.body()).isEqualTo(201);
            Caller hog = ServiceBed.caller("gsu-r13hog", 67400, false);
            s.allocate(hog, GpuRequests.fromCliFlags("--gpu=6"), Optional.empty(), () -> false);
            Thread waiter = new Thread(() -> {
                try {
                    s.allocate(ServiceBed.caller("gsu-r13w", 67401, false), GpuRequests.fromCliFlags("--gpu=4"),
                            Optional.of(Duration.ofMinutes(2)), () -> false);
                } catch (Exception e) {
                    // refused by the stop
                }
            }, "review13-waiter");
            waiter.start();
            try {
                assertThat(Clients.await(() -> Clients.running(s).size() == 2 && s.queueView().size() == 1, 60))
                        .as("two jobs run and one request waits: %s", Clients.running(s)).isTrue();
                CountDownLatch go = new CountDownLatch(1);
                List<Throwable> errors = new CopyOnWriteArrayList<>();
                List<Thread> enders = new ArrayList<>();
                for (int i = 0; i < 6; i++) {
                    boolean close = i % 2 == 1;
                    Thread t = new Thread(() -> {
                        try {
                            go.await();
                            if (close) {
                                s.close();
                            } else {
                                s.stop();
                            }
                        } catch (Throwable e) {
                            errors.add(e);
                        }
                    }, "review13-ender-" + i);
                    t.start();
                    enders.add(t);
                }
                go.countDown();
                for (Thread t : enders) {
                    t.join(60_000);
                    assertThat(t.isAlive()).as("%s returned", t.getName()).isFalse();
                }
                waiter.join(60_000);
                bed.console.close();
                bed.console = null;
                s.close();
                bed.service = null;
                assertThat(errors).as("stops and closes racing").isEmpty();
                assertThat(bed.loginProbe(login)).as("the login cgroup after the close").doesNotContain("EPERM");
                assertThat(Clients.jobCgroups(bed.jobParent)).as("job cgroups after the close").isEmpty();
                assertThat(Clients.held(bed)).as("allocations after the close (the hog's stays)").hasSize(1);
                assertThat(Clients.await(() -> Clients.threads("gpusched-").stream().allMatch(before::contains), 15))
                        .as("threads named gpusched-* after the close: %s (before: %s)", Clients.threads("gpusched-"),
                                before)
                        .isTrue();
                NodeService next = bed.start(); // the one-service lock was given up
                assertThat(next.recovered()).as("what the next start had to end").isEmpty();
            } finally {
                Clients.cleanUp(bed, alice, attached);
            }
        }
    }
}
