package io.gpusched.service.adversarial.review32;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
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
 * Review32: an owner named by an admin is resolved by UserDirectory.lookup, which looks up only names in printable
 * ASCII (UserQuotas.validName), while the caller resolver and GpuRequest take any printable name. For a real user of
 * the node whose name NSS gives as "gsr32-jos\u00e9" (useradd --badname; LDAP/sssd names are often UTF-8), root's
 * {@code --owner=gsr32-jos\u00e9} is refused "is not a user of this node (NSS does not know the name ...)", which is
 * false: id(1) and getent know it. Refusals are true (issue 33).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class AdminCannotAllocateForAUserWithANonAsciiNameAttackTest {

    private static final String NAME = "gsr32-jos\u00e9";
    /** The name in UTF-8, made by the shell (the JVM's argument encoding may not be UTF-8). */
    private static final String SH_NAME = "\"$(printf 'gsr32-jos\\303\\251')\"";

    private static LocalUsers.Result sh(String command) throws Exception {
        return LocalUsers.run(List.of("/bin/sh", "-c", command), 30);
    }

    @Test
    void anAdminAllocatesForARealUserWhoseNameIsNotAscii(@TempDir Path tmp) throws Exception {
        Assumptions.assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        sh("/usr/sbin/userdel " + SH_NAME);
        LocalUsers.Result made = sh("/usr/sbin/useradd -M --badname " + SH_NAME);
        Assumptions.assumeTrue(made.exit() == 0, "useradd --badname " + NAME + ": " + made.err());
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300)))) {
            LocalUsers.Result id = sh("/usr/bin/id -u -- " + SH_NAME);
            assertThat(id.exit()).as("NSS knows %s: %s", NAME, id).isZero();
            NodeService s = bed.start();
            Caller root = ServiceBed.root();
            Allocation[] got = new Allocation[1];
            Throwable why = catchThrowable(() -> got[0] = s.allocate(root, GpuRequests.fromCliFlags(List.of("--gpu=1",
                    "--owner=" + NAME)), Optional.empty(), () -> false));
            try {
                assertThat(why).as("root allocates for %s (uid %s by id(1))", NAME, id.out().strip()).isNull();
                assertThat(got[0].request().ownerUid().orElse(-1)).isEqualTo(Long.parseLong(id.out().strip()));
            } finally {
                if (got[0] != null) {
                    s.release(root, got[0].id());
                }
            }
        } finally {
            sh("/usr/sbin/userdel " + SH_NAME);
        }
    }
}
