package io.gpusched.isolation;

import static io.gpusched.isolation.CgroupBed.nv;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.isolation.internal.Bpf;
import io.gpusched.isolation.internal.Libc;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * cgroup v2 fences left behind: by a JVM killed with SIGKILL after fencing, and by older code that stacked programs.
 * After {@code fence} exactly one program of ours is attached and only the new allocation opens; after
 * {@code revoke} none is, and the host's policy is back.
 */
@Tag("cgroup")
class DeadFenceTest {
    @TempDir
    Path dir;
    CgroupBed bed;
    Process child;

    @AfterEach
    void tearDown() throws Exception {
        if (child != null) {
            child.destroyForcibly().waitFor();
        }
        if (bed != null) {
            bed.close();
        }
    }

    @Test
    void issue12_aFenceLeftByAKilledJvmIsReplacedThenRevoked() throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V2);
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V2));
        child = new ProcessBuilder(IsolationChild.command("fence", cg.toString(), bed.dev.toString(),
                bed.proc.toString(), "3")).redirectErrorStream(true).start();
        BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line = r.readLine(); line != null && !line.equals("FENCED"); line = r.readLine()) {
            seen.append(line).append('\n');
        }
        assertThat(child.isAlive()).as("child fenced: %s", seen).isTrue();
        child.destroyForcibly();
        assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(CgroupIsolationTest.ourPrograms(cg)).as("the dead JVM's program stays attached").isEqualTo(1);
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(3)));

        Fence f = bed.track(iso.fence(cg, bed.gpus(1)));
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(1);
        assertThat(bed.probe(cg)).as("the dead fence does not stack with ours").isEqualTo(bed.only(nv(1)));
        f.revoke();
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isZero();
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(0, 1, 2, 3)));
    }

    @Test
    void issue12_stackedProgramsOfOursAreAllReplacedAndAllRevoked() throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V2);
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V2));
        Libc libc = Libc.Holder.get();
        Bpf bpf = new Bpf(libc);
        int cgFd = libc.open(cg.toString(), Libc.O_DIR_CLOEXEC);
        try {
            for (int gpu : new int[]{2, 3}) {
                List<DeviceRule> rules = List.of(DeviceRule.allowChar(195, gpu, "rw"),
                        DeviceRule.allowChar(195, 255, "rw"), DeviceRule.denyChar(195, DeviceRule.ANY, "rwm"));
                int fd = bpf.loadDeviceProgram(BpfDeviceProgram.of(rules, true).bytes(),
                        CgroupDeviceIsolator.PROGRAM_NAME);
                bpf.attach(cgFd, fd, Bpf.F_ALLOW_MULTI, 0);
                bpf.close(fd);
            }
        } finally {
            bpf.close(cgFd);
        }
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(2);
        assertThat(bed.probe(cg)).as("two stacked programs admit nothing of 195 but ctl").isEqualTo(bed.only(
                "nvidiactl"));
        Fence f = bed.track(iso.fence(cg, bed.gpus(2)));
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(1);
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(2)));
        f.revoke();
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isZero();
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(0, 1, 2, 3)));
    }
}
