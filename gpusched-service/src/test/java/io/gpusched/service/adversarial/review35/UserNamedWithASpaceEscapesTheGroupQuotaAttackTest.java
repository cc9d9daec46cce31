package io.gpusched.service.adversarial.review35;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review35: since review32 CallerResolver.name is UserQuotas.validName, which refuses a name with whitespace. NSS may
 * well give one (an Active Directory sAMAccountName through sssd may hold a space; useradd --badname makes one). Such a
 * caller is then "unknown": named by their uid, with NO groups (CallerResolver.lookUp returns unknown(uid) before it
 * even asks for the groups, which `id -znG +uid` would give). Per-group limits go by the groups, so a member of a
 * group limited to 2 GPUs holds any number (here 3 of 3 asked) over the socket, while a member named plainly is
 * refused her third. The class says "a failure never grants a right"; issue 33: no one ever holds more than their
 * quota.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UserNamedWithASpaceEscapesTheGroupQuotaAttackTest {

    @Test
    void aGroupsLimitHoldsForAMemberWhoseNameHasASpace(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root and useradd");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        String suffix = HexFormat.of().formatHex(r);
        String group = "gsg-lim35-" + suffix;
        String spaced = "gsu-ann smith35-" + suffix;
        check(LocalUsers.run(List.of("groupadd", group), 60), "groupadd " + group);
        try {
            check(LocalUsers.run(List.of("useradd", "--badname", "-M", "-U", "-s", "/bin/sh", "-G", group, spaced),
                    60), "useradd --badname");
            long uid = Long.parseLong(LocalUsers.run(List.of("id", "-u", spaced), 10).out().strip());
            long gid = Long.parseLong(LocalUsers.run(List.of("id", "-g", spaced), 10).out().strip());
            LocalUsers.User ann = new LocalUsers.User(spaced, uid, gid);
            GpuConfig config = GpuConfig.builder().users(new UserQuotas(0, Map.of(), Map.of(group, 2)))
                    .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                            .withKillGrace(Duration.ofMillis(300)))
                    .build();
            try (ServiceBed bed = new ServiceBed(tmp, config)) {
                NodeService s = bed.start();
                bed.serve();
                LocalUsers.User plain = bed.accounts.user("plain", group);
                try {
                    List<Answer> plains = new ArrayList<>();
                    for (int i = 0; i < 3; i++) {
                        plains.add(bed.post(plain, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}"));
                    }
                    assertThat(plains.get(2).status()).as("control: %s's third GPU, over %s's limit of 2: %s",
                            plain.name(), group, plains.get(2).body()).isEqualTo(409);
                    List<Answer> anns = new ArrayList<>();
                    for (int i = 0; i < 3; i++) {
                        anns.add(bed.post(ann, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}"));
                    }
                    long held = s.scheduler().allocations().stream()
                            .filter(a -> a.request().ownerUid().orElse(-1) == uid)
                            .mapToLong(a -> a.deviceIndices().size()).sum();
                    assertThat(held).as("GPUs held by \"%s\" (uid %d), a member of %s (limit 2); her answers: %s",
                            spaced, uid, group, anns).isLessThanOrEqualTo(2);
                } finally {
                    for (Allocation a : s.scheduler().allocations()) {
                        s.scheduler().release(a.id());
                    }
                }
            }
        } finally {
            LocalUsers.run(List.of("userdel", "-f", spaced), 60);
            LocalUsers.run(List.of("groupdel", group), 60);
        }
    }

    private static void check(LocalUsers.Result res, String what) throws IOException {
        if (res.exit() != 0) {
            throw new IOException(what + " failed (" + res.exit() + "): " + res.err());
        }
    }
}
