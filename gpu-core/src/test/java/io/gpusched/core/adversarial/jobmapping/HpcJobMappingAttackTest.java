package io.gpusched.core.adversarial.jobmapping;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfigException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.HpcJobMapping;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job-mapping directory another user could write is a way to label any GPU's metrics with any job: refused when
 * opened (a symbolic link, writable by group or others, owned by another user, not a directory) and when swapped for
 * a link later; a link planted under a mapping name is replaced, never written through.
 */
@Tag("adversarial")
class HpcJobMappingAttackTest {
    @TempDir
    Path tmp;

    static final Allocation A = new Allocation("a-1", List.of(GpuDevice.builder().index(0).uuid("GPU-0")
            .vendor(GpuVendor.NVIDIA).name("A100").memory(MemorySize.ofGibibytes(80)).pciBusId("00000000:01:00.0")
            .build()), GpuRequest.builder().count(1).jobId("4567").build(), Instant.parse("2026-03-02T10:00:00Z"));

    Path dir(String mode) throws IOException {
        Path d = Files.createDirectory(tmp.resolve("jobs-" + mode.hashCode()));
        Files.setPosixFilePermissions(d, PosixFilePermissions.fromString(mode));
        return d;
    }

    @Test
    void symbolicLinkIsRefused() throws IOException {
        Path real = dir("rwxr-xr-x");
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        assertThatThrownBy(() -> HpcJobMapping.open(link)).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining(link.toString()).hasMessageContaining("symbolic link");
    }

    @Test
    void writableByGroupOrOthersIsRefused() throws Exception {
        Path others = dir("rwxrwxrwx");
        assertThatThrownBy(() -> HpcJobMapping.open(others)).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("writable by other users").hasMessageContaining("chmod go-w " + others);
        Path group = dir("rwxrwxr-x");
        assertThatThrownBy(() -> HpcJobMapping.open(group)).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("writable by its group");
        Path sticky = Files.createDirectory(tmp.resolve("sticky"));
        assertThat(new ProcessBuilder("chmod", "1777", sticky.toString()).start().waitFor()).isZero();
        assertThatThrownBy(() -> HpcJobMapping.open(sticky)).as("even /tmp-like sticky directories")
                .isInstanceOf(GpuConfigException.class);
    }

    @Test
    void ownedByAnotherUserIsRefused() throws IOException {
        int me = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
        assumeTrue(me == 0, "changing a directory's owner needs root");
        Path d = dir("rwxr-xr-x");
        Files.setAttribute(d, "unix:uid", 54_321);
        assertThatThrownBy(() -> HpcJobMapping.open(d)).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("owned by uid 54321");
    }

    @Test
    void aFileIsNotADirectory() throws IOException {
        Path f = Files.writeString(tmp.resolve("file"), "x");
        assertThatThrownBy(() -> HpcJobMapping.open(f)).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("not a directory");
    }

    @Test
    void directorySwappedForALinkAfterOpeningIsRefusedAndNothingWrittenThroughIt() throws IOException {
        Path d = dir("rwxr-xr-x");
        HpcJobMapping m = HpcJobMapping.open(d);
        Path elsewhere = dir("rwx------");
        Files.delete(d);
        Files.createSymbolicLink(d, elsewhere);
        assertThatThrownBy(() -> m.sync(List.of(A))).isInstanceOf(GpuConfigException.class)
                .hasMessageContaining("symbolic link");
        try (var s = Files.list(elsewhere)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    @Test
    void aLinkPlantedUnderAMappingNameIsReplacedNotWrittenThrough() throws IOException {
        Path d = dir("rwxr-xr-x");
        Path victim = Files.writeString(tmp.resolve("victim"), "precious\n");
        Files.createSymbolicLink(d.resolve("0"), victim);
        HpcJobMapping.open(d).sync(List.of(A));
        assertThat(Files.readString(victim)).isEqualTo("precious\n");
        assertThat(Files.isSymbolicLink(d.resolve("0"))).isFalse();
        assertThat(Files.readString(d.resolve("0"), StandardCharsets.US_ASCII)).isEqualTo("4567\n");
        assertThat(Files.isRegularFile(d.resolve("0"), LinkOption.NOFOLLOW_LINKS)).isTrue();
    }
}
