package io.gpusched.core.host.adversarial.review57;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.host.CgroupMounts;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review 57. CgroupMounts documents that "a mount point ... that is not valid in the file-name encoding loses that
 * line only" (review56), and its code skips a line whose {@code Path.of} throws. But it decodes the name leniently
 * ({@code new String(bytes, fileNames())}: invalid bytes become U+FFFD), so {@code Path.of} never throws and the line
 * is not lost: its mount point is taken as a path with U+FFFD in it, a directory that does not exist, and being the
 * first cgroup2 mount listed it hides the real one after it (the same for the v1 devices hierarchy). A cgroup2 mount
 * with a Latin-1 name (a bind of the hierarchy into a chroot or a container root under {@code /srv/caf\xe9}) listed
 * before {@code /sys/fs/cgroup} then makes AllocationAttribution and gpu-isolation work on a path that is not there.
 */
@Tag("adversarial")
class Cgroup2MountLineNotValidInTheFileNameEncodingTest {
    @TempDir
    Path tmp;

    @Test
    void aCgroup2LineWhoseMountPointIsNotValidIsLostNotTakenWithReplacementCharacters() throws IOException {
        Assumptions.assumeTrue(CgroupMounts.fileNames().equals(StandardCharsets.UTF_8),
                "the file-name encoding is UTF-8 (byte 0xE9 alone is not valid there)");
        Path root = Files.createDirectories(tmp.resolve("sys/fs/cgroup"));
        Path mountinfo = tmp.resolve("mountinfo");
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        b.write(("25 1 0:31 / " + root + " rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n")
                .getBytes(StandardCharsets.UTF_8));
        byte[] real = b.toByteArray();
        b.reset();
        b.write((tmp + "/srv/caf").getBytes(StandardCharsets.UTF_8));
        b.write(0xE9);
        byte[] latin1Point = b.toByteArray();
        b.reset();
        b.write("24 1 0:31 / ".getBytes(StandardCharsets.UTF_8));
        b.write(latin1Point);
        b.write("/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n"
                .getBytes(StandardCharsets.UTF_8));
        b.write(real);
        Files.write(mountinfo, b.toByteArray());

        CgroupMounts m = CgroupMounts.read(mountinfo);
        assertThat(m.v2())
                .as("the first cgroup2 line's mount point (%s/srv/caf + byte 0xE9 + /cgroup) is not valid UTF-8, the"
                        + " file-name encoding: CgroupMounts says such a line is lost, so the cgroup2 mount is %s; it"
                        + " was taken as a path with U+FFFD in it, which names no directory", tmp, root)
                .contains(root);
    }
}
