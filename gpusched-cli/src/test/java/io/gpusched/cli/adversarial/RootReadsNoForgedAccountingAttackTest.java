package io.gpusched.cli.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A state directory shared with a state group (2770), as engines beside the node service use it: the service keeps
 * its accounting under {@code gpu.service.private_dir}, so an {@code accounting} directory in the shared one is
 * whatever a member put there. Root's {@code report} and {@code status} must not read it (forged figures shown to the
 * admin; a journal swapped for a FIFO between a check and the open would hang root's command); with the service's
 * configuration they read the private store.
 */
@Tag("adversarial")
class RootReadsNoForgedAccountingAttackTest {
    private LocalUsers users;
    private Path base;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        users = LocalUsers.create();
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-forged-acct");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (users != null) {
            users.close();
        }
        if (base != null) {
            LocalUsers.run(List.of("rm", "-rf", base.toString()), 60);
        }
    }

    @Test
    void rootReadsNoAccountingAMemberPlantedAndReadsThePrivateStoreGivenTheConfig() throws Exception {
        String group = users.group("acct");
        User mallory = users.user("mallory", group);
        // real records, made by the demo in a private directory: what the service would have written
        Path own = base.resolve("own");
        Files.createDirectory(own, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Cli.Result demo = Cli.run(own, "--simulate", "dgx1-v100", "demo");
        assertThat(demo.exit()).as(demo.err()).isZero();
        assertThat(own.resolve("accounting")).isDirectory();

        Path shared = base.resolve("shared");
        Files.createDirectory(shared);
        assertThat(LocalUsers.run(List.of("chgrp", group, shared.toString()), 30).exit()).isZero();
        assertThat(LocalUsers.run(List.of("chmod", "2770", shared.toString()), 30).exit()).isZero();
        // mallory plants a copy as her own: records that read as real
        assertThat(LocalUsers.run(List.of("cp", "-r", own.resolve("accounting").toString(), shared.toString()), 30)
                .exit()).isZero();
        assertThat(LocalUsers.run(List.of("chown", "-R", mallory.name() + ":" + group,
                shared.resolve("accounting").toString()), 30).exit()).isZero();
        Path config = Files.writeString(base.resolve("gpusched.yaml"), "gpu:\n  state_group: " + group + "\n");

        Cli.Result planted = Cli.run(shared, "--config", config.toString(), "--simulate", "dgx1-v100", "report");
        assertThat(planted.exit()).as("root's report on the shared store: " + planted.out()).isEqualTo(4);
        assertThat(planted.err()).contains("INSECURE_PERMISSIONS").contains(shared.resolve("accounting").toString())
                .contains("--config").contains("gpu.service.private_dir");
        assertThat(planted.out()).as("nothing of the planted records").doesNotContain("alice");

        Cli.Result st = Cli.run(shared, "--config", config.toString(), "--simulate", "dgx1-v100", "status");
        assertThat(st.exit()).as(st.err()).isZero();
        assertThat(st.out()).contains("note: idle GPUs are not shown").contains("gpu.service.private_dir");

        // the attack's premise: the member may change the shared store
        LocalUsers.Result hers = LocalUsers.runAs(mallory, List.of("test", "-w", shared.resolve("accounting")
                .toString()), 30);
        assertThat(hers.exit()).as("mallory may write " + shared.resolve("accounting")).isZero();

        // with the service's configuration, root reads the private store the service writes
        Path withPrivate = Files.writeString(base.resolve("service.yaml"), "gpu:\n  state_group: " + group
                + "\n  service:\n    private_dir: " + own + "\n");
        Cli.Result report = Cli.run(shared, "--config", withPrivate.toString(), "--simulate", "dgx1-v100", "report");
        assertThat(report.exit()).as(report.err()).isZero();
        assertThat(report.out()).contains("alice").contains("carol (idle)").contains("total");
    }
}
