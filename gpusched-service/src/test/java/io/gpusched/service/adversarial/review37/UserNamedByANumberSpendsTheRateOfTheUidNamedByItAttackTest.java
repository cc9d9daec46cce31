package io.gpusched.service.adversarial.review37;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.ServiceBed.Answer;
import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review37, end to end over the socket with real accounts: ann's NSS name has a space (useradd --badname; sssd/AD), so
 * CallerResolver names her by her uid, say "1002" (52e79fe7 keeps her groups, not her name). Another account's NSS
 * name is the number "1002" (a numeric user name; its uid is another). CallerResolver names him "1002" too. The
 * scheduler's rate limits are kept by owner NAME (RateLimits.bucket(request.owner())), so the two share one bucket:
 * with a burst of 1, his one allocation spends ann's token, and ann, who never allocated anything, is refused
 * RATE_LIMITED. Issue 33: identity from the kernel (SO_PEERCRED), never from a name; no user can stall other users'
 * grants.
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class UserNamedByANumberSpendsTheRateOfTheUidNamedByItAttackTest {

    @Test
    void aUserNamedByANumberDoesNotSpendTheRateOfTheUserWithThatUid(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "needs root and useradd");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        String spaced = "gsu-ann smith37-" + HexFormat.of().formatHex(r);
        String numeric = null;
        check(LocalUsers.run(List.of("/usr/sbin/useradd", "--badname", "-M", "-U", "-s", "/bin/sh", spaced), 60),
                "useradd --badname " + spaced);
        try {
            long uid = Long.parseLong(LocalUsers.run(List.of("/usr/bin/id", "-u", spaced), 10).out().strip());
            long gid = Long.parseLong(LocalUsers.run(List.of("/usr/bin/id", "-g", spaced), 10).out().strip());
            numeric = Long.toString(uid);
            LocalUsers.Result made = LocalUsers.run(List.of("/usr/sbin/useradd", "--badname", "-M", "-U", "-s",
                    "/bin/sh", numeric), 60);
            assumeTrue(made.exit() == 0, "useradd --badname " + numeric + ": " + made.err());
            // getent takes a number for a uid: the entry NAMED by it is looked for among all of them
            String[] pw = LocalUsers.run(List.of("/usr/bin/getent", "passwd"), 10).out().lines()
                    .filter(l -> l.startsWith(uid + ":")).findFirst().orElse("").split(":");
            assumeTrue(pw.length > 3 && pw[0].equals(numeric), "no passwd entry named " + numeric);
            long nUid = Long.parseLong(pw[2]);
            long nGid = Long.parseLong(pw[3]);
            assumeTrue(nUid != uid, "same uid");
            LocalUsers.User ann = new LocalUsers.User(spaced, uid, gid);
            LocalUsers.User num = new LocalUsers.User(numeric, nUid, nGid);
            GpuConfig config = GpuConfig.builder().rateLimit(0.0001, 1)
                    .service(ServiceSettings.defaults().withAdminGroup("gsu-nonexistent")
                            .withKillGrace(Duration.ofMillis(300)))
                    .build();
            try (ServiceBed bed = new ServiceBed(tmp, config)) {
                NodeService s = bed.start();
                bed.serve();
                try {
                    Answer his = bed.post(num, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}");
                    assertThat(his.status()).as("control: the user named \"%s\" (uid %d) takes one GPU: %s",
                            numeric, nUid, his.body()).isBetween(200, 299);
                    Answer hers = bed.post(ann, "/api/v1/allocations", "{\"flags\":[\"--gpu=1\"]}");
                    assertThat(hers.status()).as("\"%s\" (uid %d), who has allocated nothing, takes one GPU of 7 free"
                            + " (rate: burst 1 per owner): %s", spaced, uid, hers.body()).isBetween(200, 299);
                } finally {
                    for (Allocation a : s.scheduler().allocations()) {
                        s.scheduler().release(a.id());
                    }
                }
            }
        } finally {
            if (numeric != null) {
                LocalUsers.run(List.of("/usr/sbin/userdel", "-f", numeric), 60);
            }
            LocalUsers.run(List.of("/usr/sbin/userdel", "-f", spaced), 60);
        }
    }

    private static void check(LocalUsers.Result res, String what) throws IOException {
        if (res.exit() != 0) {
            throw new IOException(what + " failed (" + res.exit() + "): " + res.err());
        }
    }
}
