package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.devices.GpuDeviceNodes;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Device nodes in a hostile job root: symlinks anywhere are refused, never followed; nothing lands outside. */
@Tag("root")
class DeviceNodesTest {
    @TempDir
    Path dir;
    CgroupBed bed;

    @AfterEach
    void tearDown() throws Exception {
        if (bed != null) {
            bed.close();
        }
    }

    NodePlan plan(boolean amd, int gpu) throws Exception {
        bed = new CgroupBed(dir.resolve(amd ? "amdhost" : "host"), amd);
        return NodePlan.of(new GpuDeviceNodes(bed.dev, bed.proc, false).plan(bed.gpus(gpu), bed.host.devices()));
    }

    static long files(Path p) throws Exception {
        try (var s = Files.walk(p)) {
            return s.count();
        }
    }

    @Test
    void issue12_aSymlinkedDevIsRefusedAndNothingIsMadeOutside() throws Exception {
        NodePlan p = plan(false, 1);
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Path job = Files.createDirectories(dir.resolve("job"));
        Files.createSymbolicLink(job.resolve("dev"), outside);
        assertThatThrownBy(() -> DeviceNodes.create(job, bed.dev, p, 0666)).isInstanceOf(IsolationException.class)
                .hasMessageContaining("refusing to follow").hasMessageContaining("job/dev");
        assertThat(files(outside)).as("nothing under the symlink's target").isEqualTo(1);
    }

    @Test
    void issue12_aSymlinkedSubdirectoryOrRootIsRefused() throws Exception {
        NodePlan p = plan(true, 1);
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Path job = Files.createDirectories(dir.resolve("job/dev"));
        Files.createSymbolicLink(job.resolve("dri"), outside);
        assertThatThrownBy(() -> DeviceNodes.create(dir.resolve("job"), bed.dev, p, 0666))
                .hasMessageContaining("refusing to follow");
        assertThat(files(outside)).isEqualTo(1);
        assertThat(dir.resolve("job/dev/kfd")).as("what was made before is removed").doesNotExist();
        Path linkRoot = Files.createSymbolicLink(dir.resolve("linkroot"), outside);
        assertThatThrownBy(() -> DeviceNodes.create(linkRoot, bed.dev, p, 0666))
                .hasMessageContaining("refusing to follow");
        assertThat(files(outside)).isEqualTo(1);
    }

    @Test
    void issue12_aSymlinkWhereANodeGoesIsNotFollowedNorChmodded() throws Exception {
        NodePlan p = plan(false, 1);
        Path victim = Files.writeString(dir.resolve("victim"), "secret");
        Files.setPosixFilePermissions(victim, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        Path job = Files.createDirectories(dir.resolve("job/dev"));
        Files.createSymbolicLink(job.resolve("nvidia1"), victim);
        assertThatThrownBy(() -> DeviceNodes.create(dir.resolve("job"), bed.dev, p, 0666))
                .hasMessageContaining("refusing to replace");
        assertThat(Files.getPosixFilePermissions(victim)).hasSize(2);
        assertThat(Files.readString(victim)).isEqualTo("secret");
    }

    @Test
    void nodesGetExactModeAndOwnerAndRemoveDoesNotFollowASwappedDirectory() throws Exception {
        NodePlan p = plan(true, 2);
        Path job = dir.resolve("job");
        DeviceNodes.Created made = DeviceNodes.create(job, bed.dev, p, 0660, 1234, 4321);
        assertThat(made.made()).containsExactly(job.resolve("dev/dri/renderD130"), job.resolve("dev/dri/card2"),
                job.resolve("dev/kfd"));
        for (Path n : made.made()) {
            assertThat(DeviceNodes.sameCharDevice(n, p.allowed().get(made.made().indexOf(n)))).isTrue();
            assertThat((Integer) Files.getAttribute(n, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 07777)
                    .isEqualTo(0660);
            assertThat((Integer) Files.getAttribute(n, "unix:uid", LinkOption.NOFOLLOW_LINKS)).isEqualTo(1234);
            assertThat((Integer) Files.getAttribute(n, "unix:gid", LinkOption.NOFOLLOW_LINKS)).isEqualTo(4321);
        }
        assertThat(DeviceNodes.create(job, bed.dev, p, 0660).made()).as("already there").isEmpty();
        Path outside = Files.createDirectories(dir.resolve("outside/dri"));
        Files.writeString(outside.resolve("renderD130"), "host file");
        Files.move(job.resolve("dev/dri"), dir.resolve("moved"));
        Files.createSymbolicLink(job.resolve("dev/dri"), outside);
        made.remove();
        assertThat(outside.resolve("renderD130")).as("remove did not follow the swapped symlink").exists();
        assertThat(job.resolve("dev/kfd")).doesNotExist();
    }
}
