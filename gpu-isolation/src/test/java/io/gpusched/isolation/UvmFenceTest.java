package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.isolation.internal.Libc;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Fences and the {@code nvidia-uvm} module, loaded on demand (issue 32), on real cgroups: fake uvm nodes made with
 * mknod (major 509, no driver behind them), a strict fence (an allow-list; on v1 over a default-deny cgroup), and the
 * bed's prober, a shell in the cgroup that opens each node and never asks the isolator. A fence reads
 * {@code /proc/devices} when it fences: while it has no {@code nvidia-uvm} the job cannot open the uvm nodes (no rule
 * can name them), once it has, the next fence and the next update allow them. Where an {@code nvidia-modprobe} is
 * configured, a fence that lacks the major runs it first ({@code -u -c=0}, empty environment) and fences with what it
 * loaded; a helper someone other than root could have written is never run; one that loads nothing is not run again
 * for a minute.
 */
@Tag("cgroup")
class UvmFenceTest {
    static final String LOADED = "Character devices:\n  1 mem\n195 nvidia-frontend\n509 nvidia-uvm\n\nBlock devices:\n";

    @TempDir
    Path dir;
    CgroupBed bed;

    @AfterEach
    void tearDown() throws Exception {
        if (bed != null) {
            bed.close();
        }
    }

    /** An NVIDIA bed with /dev/nvidia-uvm (509:0) and /dev/nvidia-uvm-tools (509:1) among its probed nodes. */
    CgroupBed bed() throws Exception {
        bed = new CgroupBed(dir, false);
        Libc libc = Libc.Holder.get();
        for (int minor = 0; minor < 2; minor++) {
            String name = minor == 0 ? "nvidia-uvm" : "nvidia-uvm-tools";
            libc.mknod(bed.dev.resolve(name).toString(), Libc.S_IFCHR | 0666, Libc.makedev(509, minor));
            bed.nodes.add(name);
        }
        return bed;
    }

    /** A cgroup that a strict fence may take: on v1 a default-deny one (a container runtime's shape). */
    Path cgroup(CgroupDeviceIsolator iso, Mechanism m) throws Exception {
        Path cg = bed.cgroup(CgroupBed.root(iso, m));
        if (m == Mechanism.V1) {
            CgroupBed.write(cg, "devices.deny", "a");
        }
        return cg;
    }

    CgroupDeviceIsolator.Builder strict(Mechanism m) {
        return bed.builder(m).strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW);
    }

    static List<String> rules(Fence f) {
        return f.rules().stream().map(DeviceRule::toString).toList();
    }

    @ParameterizedTest
    @EnumSource(value = Mechanism.class, names = {"V1", "V2"})
    void aFenceReadsProcDevicesWhenItFencesSoTheModuleLoadedSinceIsAllowed(Mechanism m) throws Exception {
        bed();
        CgroupDeviceIsolator iso = CgroupBed.usable(strict(m).noNvidiaModprobe().build(), m);
        Path first = cgroup(iso, m);
        Fence f = bed.track(iso.fence(first, bed.gpus(1)));
        Map<String, String> seen = bed.probe(first);
        assertThat(seen).containsEntry("nvidia1", "rw").containsEntry("nvidiactl", "rw")
                .containsEntry("nvidia-uvm", "-").containsEntry("nvidia-uvm-tools", "-").containsEntry("nvidia0", "-");
        assertThat(rules(f)).noneSatisfy(r -> assertThat(r).contains("509:"));
        assertThat(f.notes()).anySatisfy(n -> assertThat(n).contains("no cgroup rule for").contains("nvidia-uvm"));

        Files.writeString(bed.proc.resolve("devices"), LOADED); // the module is loaded after the isolator was built
        Path second = cgroup(iso, m);
        Fence g = bed.track(iso.fence(second, bed.gpus(2)));
        assertThat(rules(g)).contains("allow c 509:0 rw", "allow c 509:1 rw");
        assertThat(bed.probe(second)).containsEntry("nvidia2", "rw").containsEntry("nvidia-uvm", "rw")
                .containsEntry("nvidia-uvm-tools", "rw").containsEntry("nvidia1", "-");
        f.update(bed.gpus(1, 3));
        assertThat(bed.probe(first)).as("an update plans anew too").containsEntry("nvidia-uvm", "rw")
                .containsEntry("nvidia-uvm-tools", "rw").containsEntry("nvidia3", "rw").containsEntry("nvidia2", "-");
    }

    /** A stand-in for nvidia-modprobe that records its arguments and environment and "loads" the module. */
    Path modprobe(String name, boolean loads) throws Exception {
        Path bin = Files.createDirectories(dir.resolve("bin"));
        Path script = bin.resolve(name);
        Files.writeString(script, "#!/bin/sh\n"
                + "echo \"$@\" >> '" + dir.resolve(name + ".args") + "'\n"
                + "env | cut -d= -f1 | sort > '" + dir.resolve(name + ".env") + "'\n"
                + (loads ? "printf '" + LOADED.replace("\n", "\\n") + "' > '" + bed.proc.resolve("devices") + "'\n"
                        : "echo 'FATAL: Module nvidia-uvm not found' >&2; exit 1\n"));
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwxr-xr-x"));
        return script;
    }

    List<String> runs(String name) throws Exception {
        Path args = dir.resolve(name + ".args");
        return Files.exists(args) ? Files.readAllLines(args) : List.of();
    }

    Mechanism anyMechanism() {
        CgroupDeviceIsolator probe = bed.builder(Mechanism.V2).build();
        return probe.v2Root().isPresent() && CgroupBed.v2DeviceProgramsWork(probe.v2Root().get()) ? Mechanism.V2
                : Mechanism.V1;
    }

    @Test
    void aFenceWithoutTheUvmMajorRunsNvidiaModprobeFirstAndAllowsWhatItLoaded() throws Exception {
        bed();
        Mechanism m = anyMechanism();
        Path helper = modprobe("nvidia-modprobe", true);
        CgroupDeviceIsolator iso = CgroupBed.usable(strict(m).nvidiaModprobe(helper).build(), m);
        Path cg = cgroup(iso, m);
        Fence f = bed.track(iso.fence(cg, bed.gpus(0)));
        assertThat(runs("nvidia-modprobe")).containsExactly("-u -c=0");
        assertThat(Files.readAllLines(dir.resolve("nvidia-modprobe.env")))
                .as("an empty environment but PATH (and what sh sets itself)")
                .isSubsetOf("PATH", "PWD", "SHLVL", "_", "OLDPWD");
        assertThat(rules(f)).contains("allow c 509:0 rw", "allow c 509:1 rw");
        assertThat(bed.probe(cg)).containsEntry("nvidia0", "rw").containsEntry("nvidia-uvm", "rw")
                .containsEntry("nvidia-uvm-tools", "rw");
        assertThat(f.notes()).anySatisfy(n -> assertThat(n).contains("nvidia-modprobe -u -c=0 exited 0")
                .contains("nvidia-uvm is loaded"));
        f.update(bed.gpus(1));
        assertThat(runs("nvidia-modprobe")).as("loaded: not run again").hasSize(1);
    }

    @Test
    void aModprobeThatLoadsNothingIsNotRunAgainAtOnceAndTheFenceGoesOnWithoutUvm() throws Exception {
        bed();
        Mechanism m = anyMechanism();
        Path helper = modprobe("nvidia-modprobe", false);
        CgroupDeviceIsolator iso = CgroupBed.usable(strict(m).nvidiaModprobe(helper).build(), m);
        Path cg = cgroup(iso, m);
        Fence f = bed.track(iso.fence(cg, bed.gpus(0)));
        assertThat(f.notes()).anySatisfy(n -> assertThat(n).contains("exited 1").contains("Module nvidia-uvm not found")
                .contains("still not loaded"));
        assertThat(bed.probe(cg)).containsEntry("nvidia0", "rw").containsEntry("nvidia-uvm", "-");
        f.update(bed.gpus(1));
        bed.track(iso.fence(cgroup(iso, m), bed.gpus(2)));
        assertThat(runs("nvidia-modprobe")).as("once per retry period, not at every fence").hasSize(1);
    }

    @Test
    void aModprobeSomeoneElseCouldHaveWrittenIsNeverRunAsRoot() throws Exception {
        bed();
        Mechanism m = anyMechanism();
        Path owned = modprobe("owned-by-nobody", true);
        Files.setAttribute(owned, "unix:uid", 65534);
        Path writable = modprobe("group-writable", true);
        Files.setPosixFilePermissions(writable, PosixFilePermissions.fromString("rwxrwxr-x"));
        for (Path helper : List.of(owned, writable)) {
            CgroupDeviceIsolator iso = CgroupBed.usable(strict(m).nvidiaModprobe(helper).build(), m);
            Path cg = cgroup(iso, m);
            Fence f = bed.track(iso.fence(cg, bed.gpus(0)));
            String name = helper.getFileName().toString();
            assertThat(runs(name)).as(name).isEmpty();
            assertThat(f.notes()).anySatisfy(n -> assertThat(n).contains("not run").contains(helper.toString()));
            assertThat(bed.probe(cg)).as(name).containsEntry("nvidia-uvm", "-");
            f.revoke();
        }
    }

    @Test
    void withAFixtureProcRootNoHostModprobeIsRunByDefault() throws Exception {
        bed();
        CgroupDeviceIsolator iso = bed.builder(Mechanism.AUTO).build();
        assertThat(iso.plan(bed.gpus(1)).notes()).noneSatisfy(n -> assertThat(n).matches("/\\S*nvidia-modprobe -u .*"));
    }
}
