package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link StateDirectory#othersMayChange}: before root reads files there (an accounting store), whether a user other
 * than root and itself could forge them or swap one for a FIFO, on the directory or on any directory above it.
 */
class OthersMayChangeTest {

    private static void chmod(Path p, String mode) throws Exception {
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(mode));
    }

    @Test
    void aDirectoryOnlyItsOwnerWritesIsTrustedAndSoIsOneNotMadeYetBelowIt(@TempDir Path tmp) throws Exception {
        Path own = Files.createDirectory(tmp.resolve("own"));
        chmod(own, "rwxr-xr-x");
        assertThat(StateDirectory.othersMayChange(own)).isEmpty();
        assertThat(StateDirectory.othersMayChange(own.resolve("accounting"))).as("absent, in a trusted one").isEmpty();
    }

    @Test
    void aDirectoryItsGroupMayWriteIsNamedWithItsMode(@TempDir Path tmp) throws Exception {
        Path shared = Files.createDirectory(tmp.resolve("shared"));
        chmod(shared, "rwxrwx---");
        Optional<String> why = StateDirectory.othersMayChange(shared);
        assertThat(why).get().asString().contains(shared.toString()).contains("mode 770");
        Path below = Files.createDirectory(shared.resolve("accounting"));
        chmod(below, "rwxr-xr-x");
        assertThat(StateDirectory.othersMayChange(below)).as("a private one under it: the group renames it")
                .get().asString().contains(shared + " has mode 770");
        assertThat(StateDirectory.othersMayChange(shared.resolve("absent"))).as("not made yet: the group may make it")
                .get().asString().contains("mode 770");
    }

    @Test
    void aStickyDirectoryAboveIsTrustedButNotAsTheDirectoryItself(@TempDir Path tmp) throws Exception {
        Path sticky = Files.createDirectory(tmp.resolve("sticky"));
        chmod(sticky, "rwxrwxrwx");
        Files.setAttribute(sticky, "unix:mode", 01777);
        Path own = Files.createDirectory(sticky.resolve("own"));
        chmod(own, "rwx------");
        assertThat(StateDirectory.othersMayChange(own)).as("like a directory of its own under /tmp").isEmpty();
        assertThat(StateDirectory.othersMayChange(sticky.resolve("absent")))
                .as("absent in a sticky one: anyone may make it first").get().asString().contains("mode 1777");
    }

    @Test
    void aLinkIsJudgedByWhereItLeadsToo(@TempDir Path tmp) throws Exception {
        Path shared = Files.createDirectory(tmp.resolve("shared"));
        chmod(shared, "rwxrwx---");
        Path target = Files.createDirectory(shared.resolve("target"));
        chmod(target, "rwx------");
        Path own = Files.createDirectory(tmp.resolve("own"));
        Path link = Files.createSymbolicLink(own.resolve("link"), target);
        assertThat(StateDirectory.othersMayChange(link)).get().asString().contains(shared + " has mode 770");
    }

    @Test
    void aDirectoryOfAnotherUserIsNamedWithItsOwner(@TempDir Path tmp) throws Exception {
        assumeTrue(StateDirectory.isRoot(), "needs root, to give a directory to another uid");
        Path theirs = Files.createDirectory(tmp.resolve("theirs"));
        chmod(theirs, "rwx------");
        Files.setAttribute(theirs, "unix:uid", 65534);
        assertThat(StateDirectory.othersMayChange(theirs)).get().asString().contains("owned by uid 65534");
        Path mine = Files.createDirectory(theirs.resolve("mine"));
        assertThat(StateDirectory.othersMayChange(mine)).as("under it").get().asString()
                .contains(theirs + " is owned by uid 65534");
    }
}
