package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuConfig;
import io.gpusched.core.ServiceSettings;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What {@code gpusched doctor} says of the login fence when cron and at run their jobs beside {@code user.slice}
 * (Debian's cron and atd PAM stacks have no pam_systemd, so their jobs never reach the fenced slice): a cgroup tree
 * under a temporary directory, with no GPU node to probe (the probe itself needs root and is tested with the fence).
 */
class ProtectionTest {

    private static GpuConfig fencing(Path... cgroups) {
        return GpuConfig.builder().service(ServiceSettings.defaults().withLoginCgroups(List.of(cgroups))).build();
    }

    @Test
    void cronAndAtBesideAFencedUserSliceAreNamedAsOutsideTheFence(@TempDir Path tmp) throws Exception {
        Path root = Files.createDirectories(tmp.resolve("cg"));
        Path users = Files.createDirectories(root.resolve("user.slice"));
        Path cron = Files.createDirectories(root.resolve("system.slice/cron.service"));
        Path atd = Files.createDirectories(root.resolve("system.slice/atd.service"));
        Files.createDirectories(root.resolve("system.slice/ssh.service"));
        Path dev = Files.createDirectories(tmp.resolve("dev"));

        Protection p = Protection.check(fencing(users), dev, tmp.resolve("proc"));
        assertThat(p.loginFence()).contains(cron + ": cron or at jobs run here, outside the login fence",
                atd + ": cron or at jobs run here, outside the login fence");
        assertThat(p.verdict()).contains("cron and at jobs run outside the fence").contains(cron.toString())
                .contains(atd.toString()).contains("gpu.service.login_cgroups");

        Protection all = Protection.check(fencing(users, cron, atd), dev, tmp.resolve("proc"));
        assertThat(all.verdict()).as("both listed: nothing outside").doesNotContain("outside the fence");
        assertThat(all.loginFence()).noneMatch(l -> l.contains("outside the login fence"));
    }

    @Test
    void aHostWithoutCronOrAtSaysNothingOfThem(@TempDir Path tmp) throws Exception {
        Path users = Files.createDirectories(tmp.resolve("cg/user.slice"));
        Files.createDirectories(tmp.resolve("cg/system.slice/ssh.service"));
        Protection p = Protection.check(fencing(users), Files.createDirectories(tmp.resolve("dev")), tmp);
        assertThat(p.verdict()).doesNotContain("cron");
        assertThat(p.loginFence()).noneMatch(l -> l.contains("cron"));
    }
}
