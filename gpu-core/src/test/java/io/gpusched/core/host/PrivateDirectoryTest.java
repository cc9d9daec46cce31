package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.GpuException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link StateDirectory#requirePrivate}: where a root service keeps what only it may write (its token, job output,
 * lock, fence records), nobody else may rename or replace anything, on the directory or above it.
 */
class PrivateDirectoryTest {
    private static final String SETTING = "gpu.service.private_dir";

    private static int mode(Path p) throws Exception {
        return (Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 07777;
    }

    @Test
    void anAbsentDirectoryIsMadeForItsOwnerAlone(@TempDir Path tmp) throws Exception {
        Path own = tmp.resolve("a/own");
        assertThat(StateDirectory.requirePrivate(own, SETTING)).isEqualTo(own);
        assertThat(Files.isDirectory(own, LinkOption.NOFOLLOW_LINKS)).isTrue();
        assertThat(mode(own)).isEqualTo(0700);
        assertThat(StateDirectory.requirePrivate(own, SETTING)).as("again: as it is").isEqualTo(own);
    }

    @Test
    void aLinkOrAFileIsRefusedAndNothingIsFollowed(@TempDir Path tmp) throws Exception {
        Path target = Files.createDirectory(tmp.resolve("target"));
        Path link = Files.createSymbolicLink(tmp.resolve("own"), target);
        assertThatThrownBy(() -> StateDirectory.requirePrivate(link, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining(SETTING).hasMessageContaining(link.toString()).hasMessageContaining("a link");
        Path file = Files.writeString(tmp.resolve("file"), "x");
        assertThatThrownBy(() -> StateDirectory.requirePrivate(file, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining("not a directory");
    }

    @Test
    void aDirectoryOthersMayWriteIsRefusedNamingWhatToDo(@TempDir Path tmp) throws Exception {
        Path own = Files.createDirectory(tmp.resolve("own"));
        Files.setPosixFilePermissions(own, PosixFilePermissions.fromString("rwxrwx---"));
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining(SETTING).hasMessageContaining("mode 770")
                .hasMessageContaining("chmod go-w " + own);
    }

    @Test
    void aDirectoryUnderOneAGroupMayWriteIsRefusedNamingThatOne(@TempDir Path tmp) throws Exception {
        Path shared = Files.createDirectory(tmp.resolve("shared"));
        Path own = Files.createDirectory(shared.resolve("own"));
        Files.setPosixFilePermissions(shared, PosixFilePermissions.fromString("rwxrwx---"));
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining("the directory above it, " + shared).hasMessageContaining("mode 770");
        Files.setPosixFilePermissions(shared, PosixFilePermissions.fromString("rwxr-xr-x"));
        assertThat(StateDirectory.requirePrivate(own, SETTING)).isEqualTo(own);
    }

    @Test
    void aStickyDirectoryAboveIsAcceptedAsTmpIs(@TempDir Path tmp) throws Exception {
        Path sticky = Files.createDirectory(tmp.resolve("sticky"));
        Files.setAttribute(sticky, "unix:mode", 01777);
        Path own = sticky.resolve("own");
        assertThat(StateDirectory.requirePrivate(own, SETTING)).isEqualTo(own);
        Files.setAttribute(sticky, "unix:mode", 0777);
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).as("the same without the sticky bit")
                .isInstanceOf(GpuException.class).hasMessageContaining("the directory above it, " + sticky);
    }

    @Test
    void aLinkOnTheWayLeadsWhereTheChainIsCheckedToo(@TempDir Path tmp) throws Exception {
        Path shared = Files.createDirectory(tmp.resolve("shared"));
        Path inner = Files.createDirectory(shared.resolve("inner"));
        Files.setPosixFilePermissions(shared, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path via = Files.createSymbolicLink(tmp.resolve("via"), inner);
        Path own = via.resolve("own");
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining(shared.toString());
    }

    @Test
    void aDirectoryOfAnotherUserOrUnderOneIsRefused(@TempDir Path tmp) throws Exception {
        assumeTrue(StateDirectory.isRoot(), "needs root: the test gives the directory to another uid");
        Path theirs = Files.createDirectory(tmp.resolve("theirs"));
        Path own = Files.createDirectory(theirs.resolve("own"));
        Files.setAttribute(own, "unix:uid", 65534);
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).isInstanceOf(GpuException.class)
                .hasMessageContaining("owned by uid 65534");
        Files.setAttribute(own, "unix:uid", 0);
        Files.setAttribute(theirs, "unix:uid", 65534);
        assertThatThrownBy(() -> StateDirectory.requirePrivate(own, SETTING)).as("its parent is another user's")
                .isInstanceOf(GpuException.class).hasMessageContaining("the directory above it, " + theirs)
                .hasMessageContaining("owned by uid 65534");
    }
}
