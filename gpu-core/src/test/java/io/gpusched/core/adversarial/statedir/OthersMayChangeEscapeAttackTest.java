package io.gpusched.core.adversarial.statedir;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.host.StateDirectory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link StateDirectory#othersMayChange} judges the path root then reads. Two ways a store that a state group may
 * change is judged private: a {@code ..} after a link (the check normalizes it away lexically, the kernel walks it
 * from where the link leads), and a link that leads to another link kept in a group-writable directory (only the
 * first and the last hop are checked, so a member may swap the middle one between the check and the read).
 */
@Tag("adversarial")
class OthersMayChangeEscapeAttackTest {

    private static Path dir(Path p, String mode) throws Exception {
        Files.createDirectory(p);
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(mode));
        return p;
    }

    @Test
    void aDotDotAfterALinkIsWalkedFromWhereTheLinkLeads(@TempDir Path tmp) throws Exception {
        Path shared = dir(tmp.resolve("shared"), "rwxrwx---"); // a state group's directory
        Path sub = dir(shared.resolve("sub"), "rwx------");
        Path accounting = dir(shared.resolve("accounting"), "rwxrwx---"); // what a member planted
        Path own = dir(tmp.resolve("own"), "rwx------");
        Files.createSymbolicLink(own.resolve("link"), sub);
        Path asked = Path.of(own + "/link/../accounting");
        // the premise: what the kernel opens is the member's directory, not own/accounting
        assertThat(asked.toRealPath()).isEqualTo(accounting.toRealPath());
        assertThat(Files.exists(own.resolve("accounting"))).isFalse();

        assertThat(StateDirectory.othersMayChange(asked)).as("the kernel reads " + accounting + " (mode 770)")
                .isPresent();
        assertThat(StateDirectory.othersMayChange(Path.of(own + "/link/..")).map(w -> w.contains(shared.toString())))
                .as("state dir given as own/link/..: it is " + shared).contains(true);
    }

    @Test
    void aLinkLeadingToALinkAGroupMaySwapIsNotPrivate(@TempDir Path tmp) throws Exception {
        Path shared = dir(tmp.resolve("shared"), "rwxrwx---"); // members may replace what it holds
        Path own = dir(tmp.resolve("own"), "rwx------");
        Path target = dir(own.resolve("target"), "rwx------");
        Path middle = Files.createSymbolicLink(shared.resolve("middle"), target);
        Path first = Files.createSymbolicLink(own.resolve("first"), middle);
        // the premise: a member may rename or replace 'middle' (it lives in a 770 directory), so where 'first'
        // leads is the member's choice at the moment root opens it
        assertThat(first.toRealPath()).isEqualTo(target.toRealPath());

        assertThat(StateDirectory.othersMayChange(first))
                .as("own/first -> shared/middle -> own/target: " + shared + " holds the middle link").isPresent();
    }
}
