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
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review37: SERVICE.md: "An owner is named by a user name, never a uid (`--owner 1001` is not a user of the node)".
 * UserDirectory.lookup never asks NSS about a name that is a number, but answers it from what a caller NAMED BY THAT
 * NUMBER left in its cache and (since 52e79fe7) its `callers` map: a caller CallerResolver names by uid (a uid NSS
 * does not know, or a name with a space). So once uid 63738 has made one call, root's `--owner 63738` is granted, and
 * granted to uid 63738, while NSS's user "63738" (a numeric name: useradd --badname; student ids) is another uid. The
 * allocation goes to a different person than the one the admin named, and the documented refusal is not given.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminsOwnerNamedByANumberGivenToTheUidOfThatNumberAttackTest {
    private static final String NUMBER = "63738";

    @Test
    void anOwnerNamedByANumberIsNeverTheUidOfThatNumber(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root and useradd");
        LocalUsers.Result made = LocalUsers.run(List.of("/usr/sbin/useradd", "-M", "--badname", NUMBER), 60);
        Assumptions.assumeTrue(made.exit() == 0, "useradd --badname " + NUMBER + ": " + made.err());
        try {
            long nssUid = Long.parseLong(LocalUsers.run(List.of("/usr/bin/id", "-u", "--", NUMBER), 10).out()
                    .strip());
            Assumptions.assumeTrue(nssUid != Long.parseLong(NUMBER), "useradd gave uid " + NUMBER + " itself");
            GpuConfig config = GpuConfig.builder().service(ServiceSettings.defaults().withAdminGroup(
                    "gsu-nonexistent").withKillGrace(Duration.ofMillis(300))).build();
            try (ServiceBed bed = new ServiceBed(tmp, config)) {
                NodeService s = bed.start();
                // what CallerResolver makes of uid 63738 (no NSS entry, or a name with a space): named by its uid
                Caller byUid = ServiceBed.caller(NUMBER, Long.parseLong(NUMBER), false);
                Allocation once = s.allocate(byUid, GpuRequests.fromCliFlags(List.of("--gpu=1")), Optional.empty(),
                        () -> false);
                s.release(byUid, once.id());
                Caller root = ServiceBed.root();
                Allocation[] got = new Allocation[1];
                Throwable why = catchThrowable(() -> got[0] = s.allocate(root, GpuRequests.fromCliFlags(List.of(
                        "--gpu=1", "--owner=" + NUMBER)), Optional.empty(), () -> false));
                if (got[0] == null) {
                    return; // refused, as SERVICE.md says for an owner named by a number: fine
                }
                try {
                    assertThat(got[0].request().ownerUid().orElse(-1)).as("root's --owner %s (NSS: user \"%s\" is"
                            + " uid %d) was granted to uid %s", NUMBER, NUMBER, nssUid, got[0].request().ownerUid())
                            .isEqualTo(nssUid);
                } finally {
                    s.release(root, got[0].id());
                }
                assertThat(why).isNull();
            }
        } finally {
            LocalUsers.run(List.of("/usr/sbin/userdel", "-f", NUMBER), 60);
        }
    }
}
