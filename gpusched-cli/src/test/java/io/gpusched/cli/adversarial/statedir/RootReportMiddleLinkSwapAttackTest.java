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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Root's state directory named by a link in a private directory ({@code own/first}) that leads to a link a state
 * group's member may replace ({@code shared/middle}, in the 2770 shared directory): {@code othersMayChange} checked
 * the directories above {@code own/first} and above its real path, never {@code shared}, which holds the middle hop
 * (now it walks every hop as the kernel does, and refuses).
 * The member swaps the middle link between root's private directory and one of her own (planted records, copied from
 * real ones); whenever the check sees the private one and the read sees hers, root's {@code report} shows her records
 * as the node's. Real member, her own shell loop; root's report run until it shows them (or 40 times).
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class RootReportMiddleLinkSwapAttackTest {
    private LocalUsers users;
    private Path base;
    private Process swapper;

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
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-swap-acct");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (swapper != null) {
            swapper.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        if (users != null) {
            users.close();
        }
        if (base != null) {
            LocalUsers.run(List.of("rm", "-rf", base.toString()), 60);
        }
    }

    @Test
    void aMemberSwappingTheMiddleLinkGetsNoRecordIntoRootsReport() throws Exception {
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
        Path forged = Files.createDirectory(shared.resolve("forged"));
        assertThat(LocalUsers.run(List.of("cp", "-r", real.resolve("accounting").toString(), forged.toString()), 30)
                .exit()).isZero();
        assertThat(LocalUsers.run(List.of("chown", "-R", mallory.name() + ":" + group, forged.toString()), 30)
                .exit()).isZero();
        Path own = base.resolve("own");
        Files.createDirectory(own, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Path target = Files.createDirectory(own.resolve("target"));
        Path middle = shared.resolve("middle");
        Files.createSymbolicLink(middle, target);
        assertThat(LocalUsers.run(List.of("chown", "-h", mallory.name() + ":" + group, middle.toString()), 30)
                .exit()).isZero();
        Path first = Files.createSymbolicLink(own.resolve("first"), middle);
        Path config = Files.writeString(base.resolve("gpusched.yaml"), "gpu:\n  state_group: " + group + "\n");

        Result calm = cli("--state-dir", first.toString(), "--config", config.toString(), "--simulate", "dgx1-v100",
                "report");
        // the middle link lives in a directory the group may write: refused before anything is read, calm or not
        assertThat(calm.exit()).as("first -> middle -> own/target, middle in " + shared + ": " + calm.err())
                .isEqualTo(4);
        assertThat(calm.err()).contains("INSECURE_PERMISSIONS").contains(shared.toString());
        assertThat(calm.out()).doesNotContain("alice");

        // mallory flips the middle link, each flip one rename(2)
        String loop = "cd " + shared + " && while :; do ln -sfn " + target + " .a && mv -T .a middle; ln -sfn "
                + forged + " .b && mv -T .b middle; done";
        swapper = new ProcessBuilder("setpriv", "--reuid=" + mallory.uid(), "--regid=" + mallory.gid(),
                "--init-groups", "--", "sh", "-c", loop).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        List<Integer> exits = new ArrayList<>();
        String shown = null;
        for (int i = 0; i < 40 && shown == null; i++) {
            Result r = cli("--state-dir", first.toString(), "--config", config.toString(), "--simulate",
                    "dgx1-v100", "report");
            exits.add(r.exit());
            if (r.out().contains("alice")) {
                shown = r.out();
            }
        }
        assertThat(swapper.isAlive()).as("the member's swapping loop ran throughout").isTrue();
        assertThat(shown).as("root's report showed the member's planted records (exits so far " + exits + ")")
                .isNull();
    }
}
