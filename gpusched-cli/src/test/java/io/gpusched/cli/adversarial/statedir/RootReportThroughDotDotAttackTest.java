package io.gpusched.cli.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.cli.GpuschedCommand;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Root's {@code report} refuses a shared state directory's accounting (a state group's member may have written it).
 * Named through a private directory, a link and {@code ..} ({@code own/link/..}, which the kernel walks into the
 * shared directory), it still shows nothing the member planted: the store's path is normalized lexically
 * ({@code AccountingStore.at}) before it is checked and read, so both see {@code own/accounting}. Pins that the check
 * and the read stay on the same path.
 */
@Tag("adversarial")
class RootReportThroughDotDotAttackTest {
    private LocalUsers users;
    private Path base;

    private record Result(int exit, String out, String err) {
    }

    private static Result cli(String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int exit = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute(args);
        return new Result(exit, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        users = LocalUsers.create();
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-dotdot-acct");
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
    void rootsReportShowsNothingPlantedWhenTheSharedStoreIsNamedThroughALinkAndDotDot() throws Exception {
        String group = users.group("acct");
        User mallory = users.user("mallory", group);
        Path real = base.resolve("real");
        Files.createDirectory(real, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Result demo = cli("--state-dir", real.toString(), "--simulate", "dgx1-v100", "demo");
        assertThat(demo.exit()).as(demo.err()).isZero();

        Path shared = base.resolve("shared");
        Files.createDirectory(shared);
        assertThat(LocalUsers.run(List.of("chgrp", group, shared.toString()), 30).exit()).isZero();
        assertThat(LocalUsers.run(List.of("chmod", "2770", shared.toString()), 30).exit()).isZero();
        // mallory plants records that read as real, and a directory of her own to lead a link to
        assertThat(LocalUsers.run(List.of("cp", "-r", real.resolve("accounting").toString(), shared.toString()), 30)
                .exit()).isZero();
        assertThat(LocalUsers.run(List.of("chown", "-R", mallory.name() + ":" + group,
                shared.resolve("accounting").toString()), 30).exit()).isZero();
        Path sub = Files.createDirectory(shared.resolve("sub"));
        Path config = Files.writeString(base.resolve("gpusched.yaml"), "gpu:\n  state_group: " + group + "\n");

        Result direct = cli("--state-dir", shared.toString(), "--config", config.toString(), "--simulate",
                "dgx1-v100", "report");
        assertThat(direct.exit()).as("the premise: root's report refuses the shared store " + direct.out())
                .isEqualTo(4);

        Path own = base.resolve("own");
        Files.createDirectory(own, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Files.createSymbolicLink(own.resolve("link"), sub);
        String viaLink = own + "/link/..";
        assertThat(Path.of(viaLink).toRealPath()).isEqualTo(shared.toRealPath());
        Result planted = cli("--state-dir", viaLink, "--config", config.toString(), "--simulate", "dgx1-v100",
                "report");
        assertThat(planted.out()).as("root's report on " + viaLink + " (that is " + shared + ")")
                .doesNotContain("alice");
    }
}
