package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Whether {@code /proc} hides other users' processes, read from mountinfo lines as the kernel writes them. */
class HidepidMountinfoTest {

    private static boolean hides(Path tmp, String... lines) throws Exception {
        return HolderProcess.hidepid(Files.writeString(tmp.resolve("mountinfo"), String.join("\n", lines) + "\n"));
    }

    @Test
    void theTopProcMountDecides(@TempDir Path tmp) throws Exception {
        String plain = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw";
        String hidden = "41 22 0:40 / /proc rw,relatime - proc proc rw,hidepid=invisible";
        String root = "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw";
        assertThat(hides(tmp, root, plain)).isFalse();
        assertThat(hides(tmp, root, plain, hidden)).as("a hidepid mount on top of the plain one").isTrue();
        assertThat(hides(tmp, root, hidden, plain)).as("a plain mount on top").isFalse();
        assertThat(hides(tmp, root, "22 1 0:21 / /proc rw - proc proc rw,hidepid=2")).isTrue();
        assertThat(hides(tmp, root, "22 1 0:21 / /proc rw - proc proc rw,hidepid=1,gid=27")).isTrue();
        assertThat(hides(tmp, root, "22 1 0:21 / /proc rw - proc proc rw,hidepid=0")).isFalse();
        assertThat(hides(tmp, root, "22 1 0:21 / /proc rw - proc proc rw,hidepid=off")).isFalse();
        assertThat(hides(tmp, root, "30 1 0:30 / /mnt/proc rw - proc proc rw,hidepid=2"))
                .as("another mount point").isFalse();
        assertThat(hides(tmp, "garbage", "", "1 2 3")).isFalse();
        assertThat(HolderProcess.hidepid(tmp.resolve("missing"))).isFalse();
    }
}
