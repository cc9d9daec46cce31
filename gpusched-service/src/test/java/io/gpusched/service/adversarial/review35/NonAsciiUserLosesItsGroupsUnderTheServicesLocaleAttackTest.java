package io.gpusched.service.adversarial.review35;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.testing.LocalUsers;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Review35: review32 made names outside ASCII ("jos\u00e9") users like any other: CallerResolver decodes id's output as
 * UTF-8 whatever the locale, but the service's UserDirectory looks a user up BY NAME by passing the name as an
 * argument of {@code /usr/bin/id}, and the JVM encodes process arguments in {@code sun.jnu.encoding}, which comes
 * from the locale. The service's systemd unit (deploy/systemd/gpusched.service) sets no LANG, and on a host with no
 * system locale (a minimal install, a container: POSIX) a JDK 17 has sun.jnu.encoding ANSI_X3.4-1968, so "gsu-jos\u00e9"
 * reaches id as "gsu-jos?": no such user. The directory then answers "no groups" (and no uid): the per-group quota
 * lookup (DefaultGpuScheduler.quotaOf -> UserDirectory.groupsOf) gives her no group once the 10 s cache of her own
 * connection has expired, e.g. for her request that waits in the queue, so she escapes her group's limit (review32's
 * defect, back by another road), and an admin cannot allocate for her ("NSS does not know the name": ownedBy ->
 * uidOf). The probe runs UserDirectory in a JVM started with the environment that unit gives it (PATH only).
 */
@Tag("adversarial")
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class NonAsciiUserLosesItsGroupsUnderTheServicesLocaleAttackTest {

    @Test
    void theDirectoryFindsANonAsciiUsersGroupsInTheServicesEnvironment() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root and useradd");
        byte[] r = new byte[3];
        new SecureRandom().nextBytes(r);
        String suffix = HexFormat.of().formatHex(r);
        String group = "gsg-stu35-" + suffix;
        String user = "gsu-jos\u00e935-" + suffix;
        try {
            check(LocalUsers.run(List.of("groupadd", group), 60), "groupadd");
            check(LocalUsers.run(List.of("useradd", "--badname", "-M", "-U", "-s", "/bin/sh", "-G", group, user), 60),
                    "useradd --badname " + user);
            String inUtf8 = probe(user, Map.of("PATH", "/usr/bin:/bin", "LANG", "C.UTF-8"));
            assertThat(inUtf8).as("control: the directory in a UTF-8 locale finds %s's group %s", user, group)
                    .contains(group);
            String asTheUnitRunsIt = probe(user, Map.of("PATH", "/usr/bin:/bin"));
            assertThat(asTheUnitRunsIt).as("the service's UserDirectory, in a JVM with the environment of"
                    + " deploy/systemd/gpusched.service on a host without a system locale, looking up the groups of %s"
                    + " (a member of %s, whose per-group quota must apply to her)", user, group).contains(group);
        } finally {
            LocalUsers.run(List.of("userdel", "-f", user), 60);
            LocalUsers.run(List.of("groupdel", group), 60);
        }
    }

    private static String probe(String user, Map<String, String> env) throws Exception {
        String java = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(java, "-XX:-UsePerfData", "-cp",
                System.getProperty("java.class.path"), NssLookupProbe.class.getName(),
                HexFormat.of().formatHex(user.getBytes(StandardCharsets.UTF_8))));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().clear();
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException("the probe did not end: " + out);
        }
        return out.strip();
    }

    private static void check(LocalUsers.Result res, String what) throws IOException {
        if (res.exit() != 0) {
            throw new IOException(what + " failed (" + res.exit() + "): " + res.err());
        }
    }
}
