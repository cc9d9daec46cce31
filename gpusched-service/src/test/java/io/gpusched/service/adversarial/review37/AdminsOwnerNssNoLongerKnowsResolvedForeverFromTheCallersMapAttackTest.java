package io.gpusched.service.adversarial.review37;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review37: 52e79fe7's UserDirectory `callers` map keeps a connected caller's uid and groups by name with no expiry,
 * and lookup() falls back to it whenever NSS does not know the name. The review35 fix meant it for the groups of that
 * caller's own waiting requests, but NodeService.ownedBy resolves an admin's `--owner NAME` through the same
 * lookup (UserDirectory.uidOf). So a user who made one call and was then deleted (userdel: NSS no longer knows the
 * name; the uid is free for the next useradd) is still "a user of this node" for as long as the service runs: root's
 * `--owner` for that name, well past the 10-s cache, is granted, to the old uid. SERVICE.md: an owner NSS does not
 * know is refused ("is not a user of this node (NSS does not know the name ...)"); identity never from a name.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminsOwnerNssNoLongerKnowsResolvedForeverFromTheCallersMapAttackTest {

    @Test
    void anOwnerNssNoLongerKnowsIsRefusedOnceTheCacheHasExpired(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root and useradd");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        String name = "gsu-gone37-" + HexFormat.of().formatHex(r);
        LocalUsers.Result made = LocalUsers.run(List.of("/usr/sbin/useradd", "-M", "-U", "-s", "/bin/sh", name), 60);
        Assumptions.assumeTrue(made.exit() == 0, "useradd " + name + ": " + made.err());
        boolean deleted = false;
        try {
            long uid = Long.parseLong(LocalUsers.run(List.of("/usr/bin/id", "-u", name), 10).out().strip());
            long gid = Long.parseLong(LocalUsers.run(List.of("/usr/bin/id", "-g", name), 10).out().strip());
            GpuConfig config = GpuConfig.builder().service(ServiceSettings.defaults().withAdminGroup(
                    "gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
            try (ServiceBed bed = new ServiceBed(tmp, config)) {
                NodeService s = bed.start();
                Caller gone = ServiceBed.caller(new LocalUsers.User(name, uid, gid), false);
                Allocation once = s.allocate(gone, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false);
                s.release(gone, once.id());
                LocalUsers.Result del = LocalUsers.run(List.of("/usr/sbin/userdel", "-f", name), 60);
                Assumptions.assumeTrue(del.exit() == 0, "userdel " + name + ": " + del.err());
                deleted = true;
                Assumptions.assumeTrue(LocalUsers.run(List.of("/usr/bin/id", "-u", name), 10).exit() != 0,
                        "NSS still knows " + name);
                Thread.sleep(11_000); // past UserDirectory.TTL_SECONDS (10 s) since its call
                Caller root = ServiceBed.root();
                Allocation[] got = new Allocation[1];
                Throwable why = catchThrowable(() -> got[0] = s.allocate(root, GpuRequests.fromCliFlags(List.of(
                        "--gpu=1", "--owner=" + name)), Optional.empty(), () -> false));
                if (got[0] != null) {
                    s.release(root, got[0].id());
                }
                assertThat(got[0]).as("root's --owner %s, a user deleted 11 s ago (NSS does not know the name), was"
                        + " granted: %s", name, got[0]).isNull();
                assertThat(why).isInstanceOf(IllegalArgumentException.class);
            }
        } finally {
            if (!deleted) {
                LocalUsers.run(List.of("/usr/sbin/userdel", "-f", name), 60);
            }
        }
    }
}
