package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuException;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node service beside engines that share the node's state directory through a state group
 * ({@code install -d -o root -g gpusched-engines -m 2770}, docs/SERVICE.md): members may rename and replace entries of
 * that directory, so the service keeps what only root may write (its lock, job output, audit, fence records, the
 * console token, accounting) in {@code gpu.service.private_dir}, and refuses to run on a shared state directory
 * without one. A member (a real user in the group, acting with setpriv) attacks what it can reach.
 */
@Tag("adversarial")
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class SharedStateServiceFilesAttackTest {

    private static GpuConfig config(String group, Path privateDir) {
        ServiceSettings s = ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                .withKillGrace(Duration.ofMillis(300));
        return GpuConfig.builder().users(UserQuotas.none()).service(privateDir == null ? s : s.withPrivateDir(
                privateDir)).stateGroup(group).build();
    }

    /** The state directory as docs/SERVICE.md has an admin make it for a state group. */
    private static Path sharedState(Path tmp, String group) throws Exception {
        Path state = Files.createDirectories(tmp.resolve("state"));
        assertThat(LocalUsers.run(List.of("chgrp", group, state.toString()), 30).exit()).isZero();
        assertThat(LocalUsers.run(List.of("chmod", "2770", state.toString()), 30).exit()).isZero();
        return state;
    }

    private static NodeService another(ServiceBed bed) {
        return NodeService.builder().scheduler(bed.scheduler).config(bed.config).users(bed.users)
                .jobs(null, "this test runs no jobs").build();
    }

    @Test
    void withoutAPrivateDirectoryTheServiceIsRefusedAndMakesNothingThere(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: the state group is a real group");
        try (LocalUsers accounts = LocalUsers.create()) {
            String group = accounts.group("st");
            Path state = sharedState(tmp, group);
            try (ServiceBed bed = new ServiceBed(tmp, config(group, null)).jobs()) {
                assertThatThrownBy(bed::start).isInstanceOf(GpuException.class)
                        .hasMessageContaining(state.toString()).hasMessageContaining("gpu.service.private_dir");
                try (Stream<Path> s = Files.list(state)) {
                    assertThat(s.map(p -> p.getFileName().toString())).as("what the refused service left in " + state)
                            .doesNotContain("jobs", "audit.log", "login-fences", "console.token");
                }
            }
        }
    }

    @Test
    void thePrivateDirectoryMayNotLieInTheSharedOne(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: the state group is a real group");
        try (LocalUsers accounts = LocalUsers.create()) {
            String group = accounts.group("st");
            Path state = sharedState(tmp, group);
            Path inside = state.resolve("service");
            try (ServiceBed bed = new ServiceBed(tmp, config(group, inside)).jobs()) {
                assertThatThrownBy(bed::start).isInstanceOf(GpuException.class)
                        .hasMessageContaining("gpu.service.private_dir")
                        .hasMessageContaining("the directory above it, " + state);
                assertThat(Files.exists(inside, LinkOption.NOFOLLOW_LINKS)).as("made before the refusal").isFalse();
            }
        }
    }

    /**
     * Before the service starts, a member plants links where the service kept its files in the state directory,
     * pointing into a directory of root's: the service (and its console) start, keep their files in the private
     * directory, and write or delete nothing through the links.
     */
    @Test
    void linksAMemberPlantsInTheSharedDirectoryReachNothingOfRoots(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: the member acts as its own user");
        try (LocalUsers accounts = LocalUsers.create()) {
            String group = accounts.group("st");
            Path state = sharedState(tmp, group);
            Path own = tmp.resolve("own");
            Path roots = Files.createDirectories(tmp.resolve("var-log-app"));
            Path precious = Files.writeString(roots.resolve("batch.out"), "root's own, not a job's\n");
            try (ServiceBed bed = new ServiceBed(tmp, config(group, own)).jobs()) {
                LocalUsers.User eve = accounts.user("eve", group);
                for (String entry : List.of("jobs", "console.token", "audit.log", "login-fences", "isolation",
                        "accounting")) {
                    LocalUsers.Result ln = LocalUsers.runAs(eve, List.of("ln", "-s", roots.toString(),
                            state.resolve(entry).toString()), 30);
                    assertThat(ln.exit()).as("eve plants " + entry + ": " + ln.err()).isZero();
                }
                bed.start();
                bed.serve();
                assertThat(bed.service.jobsUnavailable()).as("jobs").isEmpty();
                assertThat(bed.console.token().file()).isEqualTo(own.resolve("console.token"));
                assertThat(own.resolve("jobs/service.lock")).exists();
                try (Stream<Path> s = Files.list(roots)) {
                    assertThat(s.map(p -> p.getFileName().toString())).as("root's directory, linked from " + state)
                            .containsExactly("batch.out");
                }
                assertThat(Files.readString(precious)).isEqualTo("root's own, not a job's\n");
            }
        }
    }

    /**
     * While the service runs, a member cannot reach its lock or job output, so a second service on the same
     * configuration is still refused, and a member's own {@code jobs} directory in the state directory does not keep
     * the service from starting again.
     */
    @Test
    void aMemberCanNeitherLetASecondServiceRunNorKeepTheServiceDown(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: the member acts as its own user");
        try (LocalUsers accounts = LocalUsers.create()) {
            String group = accounts.group("st");
            Path state = sharedState(tmp, group);
            Path own = tmp.resolve("own");
            try (ServiceBed bed = new ServiceBed(tmp, config(group, own)).jobs()) {
                LocalUsers.User eve = accounts.user("eve", group);
                bed.start();
                LocalUsers.Result mv = LocalUsers.runAs(eve, List.of("mv", own.resolve("jobs").toString(),
                        own.resolve("jobs.old").toString()), 30);
                assertThat(mv.exit()).as("eve moves the service's jobs directory aside").isNotZero();
                try (NodeService again = another(bed)) {
                    assertThatThrownBy(again::start).as("a second service on " + own)
                            .isInstanceOf(GpuException.class).hasMessageContaining("another gpusched service");
                }
                bed.service.close();
                bed.service = null;
                LocalUsers.Result plant = LocalUsers.runAs(eve, List.of("mkdir", state.resolve("jobs").toString()),
                        30);
                assertThat(plant.exit()).as("eve makes a jobs directory of her own in " + state).isZero();
                bed.start(); // a restart (systemctl restart gpusched) after the member's move
                assertThat(bed.service.jobsUnavailable()).as("jobs after a restart").isEmpty();
            }
        }
    }
}
