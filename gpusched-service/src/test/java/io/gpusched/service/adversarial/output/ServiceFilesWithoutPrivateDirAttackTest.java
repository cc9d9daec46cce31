package io.gpusched.service.adversarial.output;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuException;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node service without {@code gpu.service.private_dir} keeps its lock, job output, audit and fence records in the
 * state directory, and is meant to refuse a state directory others may rename or replace entries of
 * (docs/SERVICE.md, Engines). The check looks only at the directory's own group/other write bits: a state directory
 * owned by another (non-root) user, or one below a directory others may write, lets that user do everything a state
 * group member could: plant links where the service's files go, before it starts. {@code requirePrivate} (used only
 * with a private_dir) refuses both; the no-private_dir path does not.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class ServiceFilesWithoutPrivateDirAttackTest {

    private static GpuConfig config() {
        ServiceSettings s = ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                .withKillGrace(Duration.ofMillis(300));
        return GpuConfig.builder().users(UserQuotas.none()).service(s).build();
    }

    private static void sh(String... cmd) throws Exception {
        LocalUsers.Result r = LocalUsers.run(List.of(cmd), 30);
        assertThat(r.exit()).as(String.join(" ", cmd) + ": " + r.err()).isZero();
    }

    /** Lets other users reach the bed's directory (as ServiceBed.jobs() does, without cgroups). */
    private static ServiceBed traversable(ServiceBed bed, Path tmp) throws Exception {
        for (Path p = tmp; p != null && p.getNameCount() > 1; p = p.getParent()) {
            if (p.startsWith(Path.of("/tmp")) && !p.equals(Path.of("/tmp"))) {
                Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
        }
        return bed;
    }

    @Test
    void aStateDirectoryOwnedByAnotherUserIsRefusedOrNothingIsWrittenThroughItsLinks(@TempDir Path tmp)
            throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv: the owner acts as its own user");
        Path roots = Files.createDirectories(tmp.resolve("var-log-app"));
        Path precious = Files.writeString(roots.resolve("batch.out"), "root's own, not a job's\n");
        try (ServiceBed bed = traversable(new ServiceBed(tmp, config()), tmp)) {
            LocalUsers.User eve = bed.accounts.user("eve");
            // mode 0755: writable by neither group nor others, but eve's (an engine's user that made it first)
            sh("chown", eve.name(), bed.state.toString());
            sh("chmod", "0755", bed.state.toString());
            for (String entry : List.of("jobs", "audit.log", "login-fences")) {
                LocalUsers.Result ln = LocalUsers.runAs(eve, List.of("ln", "-s", roots.toString(),
                        bed.state.resolve(entry).toString()), 30);
                assertThat(ln.exit()).as("eve plants " + entry + ": " + ln.err()).isZero();
            }
            try {
                assertThatThrownBy(bed::start).as("the service on a state directory owned by " + eve.name())
                        .isInstanceOf(GpuException.class).hasMessageContaining(bed.state.toString());
            } finally {
                try (Stream<Path> s = Files.list(roots)) {
                    assertThat(s.map(p -> p.getFileName().toString())).as("root's directory, linked from "
                            + bed.state + " by its owner " + eve.name()).containsExactly("batch.out");
                }
                assertThat(Files.readString(precious)).isEqualTo("root's own, not a job's\n");
            }
        }
    }

    @Test
    void aStateDirectoryBelowOneOthersMayWriteIsRefused(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        try (ServiceBed bed = traversable(new ServiceBed(tmp, config()), tmp)) {
            // the state directory itself is root's 0755; the directory holding it is 0777, not sticky: anyone may
            // rename the state directory aside and put a directory of their own (with links) in its place
            Files.setPosixFilePermissions(bed.state, PosixFilePermissions.fromString("rwxr-xr-x"));
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxrwxrwx"));
            try {
                assertThatThrownBy(bed::start).as("the service below " + tmp + " (mode 0777)")
                        .isInstanceOf(GpuException.class).hasMessageContaining(tmp.toString());
            } finally {
                Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
        }
    }
}
