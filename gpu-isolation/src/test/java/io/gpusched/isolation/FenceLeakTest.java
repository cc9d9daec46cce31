package io.gpusched.isolation;

import static io.gpusched.isolation.CgroupBed.nv;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The leak classes of issue 12, each on real cgroups, each checked by opening fake nodes from a shell placed in the
 * cgroup and (v1) by reading {@code devices.list} ourselves.
 */
@Tag("cgroup")
class FenceLeakTest {
    @TempDir
    Path dir;
    CgroupBed bed;

    CgroupBed bed(boolean amd) throws Exception {
        bed = new CgroupBed(dir, amd);
        return bed;
    }

    @AfterEach
    void tearDown() throws Exception {
        if (bed != null) {
            bed.close();
        }
    }

    /** A container-style cgroup: default-deny, then the given allow lines. */
    static Path containerStyle(CgroupBed b, Path parent, String... allows) throws Exception {
        Path cg = b.cgroup(parent);
        CgroupBed.write(cg, "devices.deny", "a");
        for (String a : allows) {
            CgroupBed.write(cg, "devices.allow", a);
        }
        return cg;
    }

    // ---- class 2: wildcard host rules

    @Test
    void issue12_wildcardMajorInADefaultDenyCgroupIsReplacedByItsExactComplement() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c 195:* rwm", "c 1:3 rwm");
        List<String> host = CgroupBed.list(cg);
        assertThat(b.probe(cg)).as("the host's wildcard opens every GPU").isEqualTo(b.only(nv(0, 1, 2, 3)));
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        assertThat(CgroupBed.list(cg)).doesNotContain("c 195:* rwm").contains("c 195:1 rwm", "c 195:4 rwm",
                "c 195:255 rwm", "c 1:3 rwm").doesNotContain("c 195:0 rwm", "c 195:2 rwm", "c 195:3 rwm");
        f.update(b.gpus(2, 3));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(2, 3)));
        f.revoke();
        assertThat(CgroupBed.list(cg)).as("exactly the host's list again").isEqualTo(host);
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(0, 1, 2, 3)));
    }

    @Test
    void issue12_runcsDefaultRulesWithAVendorWildcard() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c *:* m", "b *:* m", "c 1:3 rwm",
                "c 136:* rwm", "c 195:* rwm");
        List<String> host = CgroupBed.list(cg);
        Fence f = b.track(iso.fence(cg, b.gpus(2)));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(2)));
        assertThat(CgroupBed.list(cg)).contains("c *:* m", "b *:* m").doesNotContain("c 195:* rwm");
        f.revoke();
        assertThat(CgroupBed.list(cg)).isEqualTo(host);
    }

    @Test
    void issue12_aWildcardOverEveryMajorIsRefusedBeforeAnyWrite() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c *:* rwm");
        assertThatThrownBy(() -> iso.fence(cg, b.gpus(1))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("c *:* rwm").hasMessageContaining("allows every major");
        assertThat(CgroupBed.list(cg)).containsExactly("c *:* rwm");
    }

    // ---- class 3: the host's own denies survive fence + revoke

    @Test
    void issue12_revokeKeepsTheHostsHiddenDenies_defaultAllow() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = b.cgroup(CgroupBed.root(iso, Mechanism.V1));
        CgroupBed.write(cg, "devices.deny", "c 195:3 rwm");
        CgroupBed.write(cg, "devices.deny", "c 195:0 w");
        Map<String, String> host = b.probe(cg);
        assertThat(host).containsEntry("nvidia3", "-").containsEntry("nvidia0", "r").containsEntry("nvidia1", "rw");
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        f.update(b.gpus(2));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(2)));
        f.revoke();
        assertThat(b.probe(cg)).as("exactly the host's policy").isEqualTo(host);
    }

    /** Issue 25 item 9: a GPU the host denies in the cgroup itself is refused, naming the GPU, cgroup and rule. */
    @Test
    void issue25_aFenceOrUpdateForAGpuTheHostDeniesInTheCgroupIsRefused_defaultAllow() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = b.cgroup(CgroupBed.root(iso, Mechanism.V1));
        CgroupBed.write(cg, "devices.deny", "c 195:3 rwm");
        CgroupBed.write(cg, "devices.deny", "c 195:0 w");
        Map<String, String> host = b.probe(cg);
        assertThatThrownBy(() -> iso.fence(cg, b.gpus(3))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("nvidia3").hasMessageContaining("GPU 3 GPU-iso-3")
                .hasMessageContaining(cg.toString()).hasMessageContaining("deny c 195:3 rwm");
        assertThat(CgroupBed.list(cg)).containsExactly("a *:* rwm");
        assertThat(b.probe(cg)).as("a refused fence writes nothing").isEqualTo(host);
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThatThrownBy(() -> f.update(b.gpus(0, 1))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("GPU 0 GPU-iso-0").hasMessageContaining(cg.toString())
                .hasMessageContaining("deny c 195:0 w");
        assertThat(f.allocation().deviceIndices()).containsExactly(1);
        assertThat(b.probe(cg)).as("the previous fence stays in force").isEqualTo(b.only(nv(1)));
        f.revoke();
        assertThat(b.probe(cg)).isEqualTo(host);
    }

    /** Issue 25 item 9: a parent that denies a GPU (inherited, hidden deny) refuses the update; the old fence holds. */
    @Test
    void issue25_anUpdateToAGpuADefaultAllowParentDeniesIsRefused() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path parent = b.cgroup(CgroupBed.root(iso, Mechanism.V1));
        CgroupBed.write(parent, "devices.deny", "c 195:2 rwm");
        Path cg = b.cgroup(parent);
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        assertThatThrownBy(() -> f.update(b.gpus(1, 2))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("nvidia2").hasMessageContaining("GPU 2 GPU-iso-2")
                .hasMessageContaining(cg.toString()).hasMessageContaining("deny c 195:2 rwm")
                .hasMessageContaining(parent.toString());
        assertThat(f.allocation().deviceIndices()).containsExactly(1);
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        f.revoke();
        assertThat(b.probe(cg)).isEqualTo(b.only("nvidia0", "nvidia1", "nvidia3", "nvidiactl"));
    }

    @ParameterizedTest
    @EnumSource(value = Strictness.class)
    void issue12_revokeGivesBackExactlyTheHostsList_defaultDeny(Strictness s) throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = CgroupBed.usable(s.apply(b.builder(Mechanism.V1)).build(), Mechanism.V1);
        Path cg = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c 195:0 rw", "c 195:255 rw", "c 1:3 rwm",
                "c 195:2 r");
        List<String> host = CgroupBed.list(cg);
        Map<String, String> hostSeen = b.probe(cg);
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        f.update(b.gpus(2));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(2)));
        f.revoke();
        assertThat(CgroupBed.list(cg)).isEqualTo(host);
        assertThat(b.probe(cg)).isEqualTo(hostSeen).containsEntry("nvidia0", "rw").containsEntry("nvidia2", "r")
                .containsEntry("nvidia3", "-");
    }

    enum Strictness {
        PLAIN, STRICT;

        CgroupDeviceIsolator.Builder apply(CgroupDeviceIsolator.Builder b) {
            return this == STRICT ? b.strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW) : b;
        }
    }

    @Test
    void issue12_strictOnADefaultAllowV1CgroupIsRefusedWithoutWriting() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = CgroupBed.usable(b.builder(Mechanism.V1)
                .strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW).build(), Mechanism.V1);
        Path cg = b.cgroup(CgroupBed.root(iso, Mechanism.V1));
        assertThatThrownBy(() -> iso.fence(cg, b.gpus(1))).hasMessageContaining("default-allow")
                .hasMessageContaining("strict");
        assertThat(CgroupBed.list(cg)).containsExactly("a *:* rwm");
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(0, 1, 2, 3)));
    }

    // ---- class 4: a cgroup removed and made again at the same path

    @ParameterizedTest
    @EnumSource(value = Mechanism.class, names = {"V1", "V2"})
    void issue12_aRecreatedCgroupIsFencedFreshAndTheStaleFenceTouchesNothing(Mechanism m) throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(m);
        Path cg = b.cgroup(CgroupBed.root(iso, m));
        Fence old = b.track(iso.fence(cg, b.gpus(1)));
        Files.delete(cg);
        Files.createDirectory(cg);
        assertThat(b.probe(cg)).as("a new cgroup starts with the host's policy").isEqualTo(b.only(nv(0, 1, 2, 3)));
        Fence fresh = b.track(iso.fence(cg, b.gpus(2)));
        assertThat(fresh).isNotSameAs(old);
        assertThat(old.isActive()).isFalse();
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(2)));
        old.revoke();
        assertThatThrownBy(() -> old.update(b.gpus(3))).isInstanceOf(IsolationException.class);
        assertThat(b.probe(cg)).as("the stale fence wrote nothing to the new cgroup").isEqualTo(b.only(nv(2)));
        if (m == Mechanism.V2) {
            assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(1);
        }
        Files.delete(cg);
        Files.createDirectory(cg);
        assertThatThrownBy(() -> fresh.update(b.gpus(0))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("was removed");
        assertThat(fresh.isActive()).isFalse();
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(0, 1, 2, 3)));
        assertThat(iso.tracked()).as("the isolator forgets fences of gone cgroups").isZero();
    }

    @Test
    void theFenceMapShrinks() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path root = CgroupBed.root(iso, Mechanism.V1);
        for (int i = 0; i < 5; i++) {
            b.track(iso.fence(b.cgroup(root), b.gpus(1))).revoke();
        }
        assertThat(iso.tracked()).isZero();
        Path gone = b.cgroup(root);
        iso.fence(gone, b.gpus(1));
        Files.delete(gone);
        b.track(iso.fence(b.cgroup(root), b.gpus(2)));
        assertThat(iso.tracked()).as("the removed cgroup's fence was pruned").isEqualTo(1);
    }

    // ---- class 6: AMD kfd, render and card nodes, both mechanisms

    @ParameterizedTest
    @EnumSource(value = Mechanism.class, names = {"V1", "V2"})
    void issue12_amdFencesRenderAndCardNodes(Mechanism m) throws Exception {
        CgroupBed b = bed(true);
        CgroupDeviceIsolator iso = b.isolator(m);
        Path cg = b.cgroup(CgroupBed.root(iso, m));
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        assertThat(b.probe(cg)).isEqualTo(b.only("dri/renderD129", "dri/card1", "kfd"));
        f.update(b.gpus(2, 3));
        assertThat(b.probe(cg)).isEqualTo(b.only("dri/renderD130", "dri/card2", "dri/renderD131", "dri/card3", "kfd"));
        f.revoke();
        assertThat(b.probe(cg)).isEqualTo(b.only(b.nodes.toArray(String[]::new)));
    }

    @Test
    void issue12_amdUnderAWildcardDrmRule() throws Exception {
        CgroupBed b = bed(true);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path cg = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c 226:* rwm", "c 511:0 rw");
        List<String> host = CgroupBed.list(cg);
        Fence f = b.track(iso.fence(cg, b.gpus(0)));
        assertThat(b.probe(cg)).isEqualTo(b.only("dri/renderD128", "dri/card0", "kfd"));
        f.revoke();
        assertThat(CgroupBed.list(cg)).isEqualTo(host);
    }

    // ---- class 7: an update the kernel refuses leaves the previous fence exactly

    @Test
    void issue12_anUpdateAParentRefusesLeavesThePreviousFence() throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(Mechanism.V1);
        Path parent = containerStyle(b, CgroupBed.root(iso, Mechanism.V1), "c 195:0 rwm", "c 195:1 rwm",
                "c 195:3 rwm", "c 195:255 rwm");
        Path cg = b.cgroup(parent);
        Fence f = b.track(iso.fence(cg, b.gpus(1)));
        List<String> fenced = CgroupBed.list(cg);
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        Allocation gpu1 = f.allocation();
        assertThatThrownBy(() -> f.update(b.gpus(2, 3))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("c 195:2 rw").hasMessageContaining("previous rules are in force")
                .hasMessageContaining("GPU 2 GPU-iso-2").hasMessageContaining(cg.toString())
                .hasMessageContaining("parent cgroup " + parent).hasMessageContaining("no rule allowing 'c 195:2 rw'")
                .hasMessageContaining("c 195:1 rwm");
        assertThat(CgroupBed.list(cg)).isEqualTo(fenced);
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(1)));
        assertThat(f.allocation()).isEqualTo(gpu1);
        f.update(b.gpus(3));
        assertThat(b.probe(cg)).isEqualTo(b.only(nv(3)));
    }

    // ---- class 9: a filesystem that is not cgroupfs

    @ParameterizedTest
    @EnumSource(value = Mechanism.class, names = {"V1", "V2"})
    void issue12_aLookAlikeFilesystemInsideTheHierarchyIsRefused(Mechanism m) throws Exception {
        CgroupBed b = bed(false);
        CgroupDeviceIsolator iso = b.isolator(m);
        Path cg = b.cgroup(CgroupBed.root(iso, m));
        Process mount = new ProcessBuilder("mount", "-t", "tmpfs", "-o", "size=1m", "lookalike", cg.toString())
                .redirectErrorStream(true).start();
        org.junit.jupiter.api.Assumptions.assumeTrue(mount.waitFor() == 0, "skipped: cannot mount tmpfs here");
        try {
            for (String f : List.of("cgroup.procs", "devices.list", "devices.allow", "devices.deny")) {
                Files.writeString(cg.resolve(f), f.equals("devices.list") ? "a *:* rwm\n" : "");
            }
            assertThatThrownBy(() -> iso.fence(cg, b.gpus(1))).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("filesystem of type 0x1021994").hasMessageContaining("look-alike");
            assertThat(Files.readString(cg.resolve("devices.deny"))).isEmpty();
        } finally {
            new ProcessBuilder("umount", cg.toString()).start().waitFor();
        }
    }

    @Test
    void unavailabilityCauseReadsTheUidWithoutLibc() {
        assertThat(CgroupDeviceIsolator.effectiveUidFromProc()).isEqualTo(io.gpusched.isolation.internal.Libc.Holder
                .get().geteuid());
    }
}
