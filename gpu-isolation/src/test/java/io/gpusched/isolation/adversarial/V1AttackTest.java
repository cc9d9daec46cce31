package io.gpusched.isolation.adversarial;

import static io.gpusched.isolation.adversarial.Adv.V1;
import static io.gpusched.isolation.adversarial.Adv.alloc;
import static io.gpusched.isolation.adversarial.Adv.container;
import static io.gpusched.isolation.adversarial.Adv.list;
import static io.gpusched.isolation.adversarial.Adv.openable;
import static io.gpusched.isolation.adversarial.Adv.probe;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusched.core.GpuDevice;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import io.gpusched.isolation.IsolationException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Attacks on cgroup v1 fences, checked by opening fake nodes from a process in the cgroup. */
@Tag("adversarial")
class V1AttackTest {
    private Adv.Host host;
    private final List<Path> cgroups = new ArrayList<>();
    private final List<GpuDevice> nv = Adv.nvDevices();
    private CgroupDeviceIsolator iso;

    @BeforeEach
    void setUp() throws Exception {
        Adv.assumeV1();
        host = new Adv.Host();
        iso = host.nvidia().mechanism(CgroupDeviceIsolator.Mechanism.V1).build();
    }

    @AfterEach
    void tearDown() throws Exception {
        for (int i = cgroups.size() - 1; i >= 0; i--) {
            Adv.rmCgroup(cgroups.get(i));
        }
        if (host != null) {
            host.close();
        }
    }

    private Path cg() throws Exception {
        Path p = Adv.mkCgroup(V1);
        cgroups.add(p);
        return p;
    }

    private List<Path> nvOpen(Path cg) throws Exception {
        return openable(List.of(cg), host.nvNodes());
    }

    @Test
    void containerHostWithWildcardsAndMOnlyRules_fenceDeniesOthers_revokeGivesBackTheExactList() throws Exception {
        Path cg = cg();
        container(cg, "c *:* m", "b *:* m", "c 195:* rwm", "c 1:3 rwm", "b 7:* rwm");
        List<String> before = list(cg);
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        f.update(alloc(nv, 2, 3));
        assertEquals(List.of(host.nv(2), host.nv(3)), nvOpen(cg));
        f.revoke();
        assertEquals(before, list(cg));
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void hostRulesWithOnlyROrW_areRemovedForOtherGpusAndRestoredExactly() throws Exception {
        Path cg = cg();
        container(cg, "c 195:1 r", "c 195:2 w", "c 195:255 rw", "c 195:* m");
        List<String> before = list(cg);
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertFalse(probe(List.of(cg), List.of(host.nv(1)), 'r').get(host.nv(1)), "GPU 1 readable under the fence");
        assertFalse(probe(List.of(cg), List.of(host.nv(2)), 'w').get(host.nv(2)), "GPU 2 writable under the fence");
        f.revoke();
        assertEquals(before, list(cg));
        assertTrue(probe(List.of(cg), List.of(host.nv(1)), 'r').get(host.nv(1)));
        assertFalse(probe(List.of(cg), List.of(host.nv(1)), 'w').get(host.nv(1)));
        assertTrue(probe(List.of(cg), List.of(host.nv(2)), 'w').get(host.nv(2)));
    }

    @Test
    void defaultAllowHostWithPartialAndWildcardDenies_revokeKeepsEveryHostDenyBit() throws Exception {
        Path cg = cg();
        Adv.write(cg.resolve("devices.deny"), "c 195:1 w");
        Adv.write(cg.resolve("devices.deny"), "c 195:2 rwm");
        Adv.write(cg.resolve("devices.deny"), "c 195:* m");
        List<Path> all = new ArrayList<>(host.nvNodes());
        all.add(host.dev.resolve("other"));
        Map<Path, Boolean> r0 = probe(List.of(cg), all, 'r');
        Map<Path, Boolean> w0 = probe(List.of(cg), all, 'w');

        Fence f = iso.fence(cg, alloc(nv, 0));
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        // the host denies writing GPU 1: an update to it is refused, naming it, and the fence of GPU 0 stays
        IsolationException e = assertThrows(IsolationException.class, () -> f.update(alloc(nv, 1)));
        assertTrue(e.getMessage().contains("GPU 1") && e.getMessage().contains("deny c 195:1 w")
                && e.getMessage().contains(cg.toString()), e.getMessage());
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        f.revoke();
        assertEquals(r0, probe(List.of(cg), all, 'r'), "read access after revoke differs from the host's");
        assertEquals(w0, probe(List.of(cg), all, 'w'), "write access after revoke differs from the host's");
    }

    @Test
    void defaultAllowHostWithAHiddenWildcardWriteDeny_survivesFenceAndRevoke() throws Exception {
        Path cg = cg();
        Adv.write(cg.resolve("devices.deny"), "c 195:* w");
        List<Path> all = new ArrayList<>(host.nvNodes());
        all.add(host.dev.resolve("other"));
        // every GPU is unwritable by the host's rule: a fence for one is refused before any write
        IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(cg, alloc(nv, 3)));
        assertTrue(e.getMessage().contains("GPU 3") && e.getMessage().contains("deny c 195:3 w"), e.getMessage());
        Map<Path, Boolean> w = probe(List.of(cg), all, 'w');
        Map<Path, Boolean> r = probe(List.of(cg), all, 'r');
        for (Path n : all) {
            assertFalse(w.get(n), n + " writable after revoke: the host denied it");
            assertTrue(r.get(n), n + " not readable after revoke: the host allowed it");
        }
    }

    @Test
    void aRecreatedCgroupIsFencedFresh_andTheStaleFenceTouchesNothing() throws Exception {
        Path cg = cg();
        Fence stale = iso.fence(cg, alloc(nv, 0));
        Files.delete(cg);
        Files.createDirectory(cg);
        assertEquals(host.nvNodes(), nvOpen(cg), "a new cgroup starts with the host default");
        Fence fresh = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        assertThrows(IsolationException.class, () -> stale.update(alloc(nv, 2)));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        stale.revoke();
        assertFalse(stale.isActive());
        assertEquals(List.of(host.nv(1)), nvOpen(cg), "the stale fence's revoke changed the new cgroup");
        fresh.update(alloc(nv, 2));
        assertEquals(List.of(host.nv(2)), nvOpen(cg));
        fresh.revoke();
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void aRecreatedContainerCgroup_fenceAgainWithoutRevoke() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm");
        Fence stale = iso.fence(cg, alloc(nv, 0));
        Files.delete(cg);
        Files.createDirectory(cg);
        container(cg, "c 195:1 rw", "c 195:2 rw");
        List<String> hostList = list(cg);
        Fence fresh = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        fresh.revoke();
        assertEquals(hostList, list(cg), "revoke of a re-created cgroup must give back its own host list");
        stale.revoke();
        assertEquals(hostList, list(cg));
    }

    @Test
    void aDefaultAllowParentThatDeniesAGpu_theFenceNeverOpensIt_andRevokeKeepsItDenied() throws Exception {
        // default-allow: the parent's deny is copied into the child; it is the host's (no fence recorded it), so an
        // update to GPU 2 is refused naming GPU 2, the cgroup and the rule, and the fence of GPU 0 stays
        Path parent = cg();
        Adv.write(parent.resolve("devices.deny"), "c 195:2 rwm");
        Path child = Files.createDirectory(parent.resolve("job"));
        cgroups.add(child);
        Fence f = iso.fence(child, alloc(nv, 0));
        assertEquals(List.of(host.nv(0)), nvOpen(child));
        IsolationException refused = assertThrows(IsolationException.class, () -> f.update(alloc(nv, 2)));
        assertTrue(refused.getMessage().contains(child.toString()) && refused.getMessage().contains("GPU 2")
                && refused.getMessage().contains("deny c 195:2 rwm"), refused.getMessage());
        assertEquals(List.of(host.nv(0)), nvOpen(child));
        assertTrue(f.isActive());
        f.update(alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(child));
        f.revoke();
        assertEquals(List.of(host.nv(0), host.nv(1), host.nv(3)), nvOpen(child));
    }

    @Test
    void aContainerParentThatDeniesANewGpu_failsTheUpdateAndKeepsTheOldFence() throws Exception {
        Path parent = cg();
        container(parent, "c 195:0 rwm", "c 195:1 rwm", "c 195:3 rwm", "c 195:255 rwm");
        Path child = Files.createDirectory(parent.resolve("job"));
        cgroups.add(child);
        List<String> hostList = list(child);
        Fence f = iso.fence(child, alloc(nv, 0, 1));
        List<String> fenced = list(child);
        IsolationException e = assertThrows(IsolationException.class, () -> f.update(alloc(nv, 2, 3)));
        assertTrue(e.getMessage().contains(child.toString()), "the error names the cgroup: " + e.getMessage());
        assertEquals(fenced, list(child));
        assertEquals(alloc(nv, 0, 1).devices(), f.allocation().devices());
        assertEquals(List.of(host.nv(0), host.nv(1)), nvOpen(child));
        f.revoke();
        assertEquals(hostList, list(child));
    }

    @Test
    void aCgroupWithChildren_theChildrensProcessesAreFencedToo_andRevokeSucceeds() throws Exception {
        Path cg = cg();
        Path kid = Files.createDirectory(cg.resolve("kid"));
        cgroups.add(kid);
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertTrue(List.of(host.nv(0)).containsAll(nvOpen(kid)), "a child cgroup opens " + nvOpen(kid));
        f.update(alloc(nv, 1));
        assertTrue(List.of(host.nv(1)).containsAll(nvOpen(kid)), "a child cgroup opens " + nvOpen(kid));
        f.revoke();
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void aContainerCgroupWithChildren_revokeGivesBackTheHostList() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 1:3 rwm");
        List<String> hostList = list(cg);
        Path kid = Files.createDirectory(cg.resolve("kid"));
        cgroups.add(kid);
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertTrue(List.of(host.nv(0)).containsAll(nvOpen(kid)));
        f.update(alloc(nv, 3));
        assertTrue(List.of(host.nv(3)).containsAll(nvOpen(kid)));
        f.revoke();
        assertEquals(hostList, list(cg));
    }

    @Test
    void badPathsAreRefusedWithATypedErrorNamingThem() throws Exception {
        Path cg = cg();
        List<String> before = list(cg);
        Path dotdot = cg.resolve("..").resolve(cg.getFileName());
        IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(dotdot, alloc(nv, 0)));
        assertTrue(e.getMessage().contains(".."), e.getMessage());
        Path missing = V1.resolve("gpx-adv-missing-" + System.nanoTime());
        e = assertThrows(IsolationException.class, () -> iso.fence(missing, alloc(nv, 0)));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        Path tmp = Files.createTempDirectory("gpx-adv-notcg");
        try {
            Files.writeString(tmp.resolve("devices.allow"), "");
            Files.writeString(tmp.resolve("devices.deny"), "");
            Files.writeString(tmp.resolve("devices.list"), "a *:* rwm\n");
            e = assertThrows(IsolationException.class, () -> iso.fence(tmp, alloc(nv, 0)));
            assertTrue(e.getMessage().contains(tmp.toString()), e.getMessage());
            assertEquals("", Files.readString(tmp.resolve("devices.deny")));
            Path link = tmp.resolve("link");
            Files.createSymbolicLink(link, cg);
            try {
                Fence viaLink = iso.fence(link, alloc(nv, 0));
                // accepted: it must be the same fence as the real path's, so revoking both gives back the host
                Fence real = iso.fence(cg, alloc(nv, 1));
                assertEquals(List.of(host.nv(1)), nvOpen(cg));
                real.revoke();
                viaLink.revoke();
                assertEquals(before, list(cg));
                assertEquals(host.nvNodes(), nvOpen(cg));
            } catch (IsolationException refused) {
                assertEquals(before, list(cg));
            }
        } finally {
            try (var s = Files.list(tmp)) {
                for (Path p : s.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(tmp);
        }
    }

    @Test
    void aLookAlikeFilesystemMountedInTheHierarchyIsRefusedBeforeAnyWrite() throws Exception {
        Path cg = cg();
        Adv.run("mount", "-t", "tmpfs", "-o", "size=1m", "gpx-adv-fake", cg.toString());
        try {
            Files.writeString(cg.resolve("devices.allow"), "");
            Files.writeString(cg.resolve("devices.deny"), "");
            Files.writeString(cg.resolve("devices.list"), "a *:* rwm\n");
            Files.writeString(cg.resolve("cgroup.procs"), "");
            Files.writeString(cg.resolve("tasks"), "");
            IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(cg, alloc(nv, 0)));
            assertTrue(e.getMessage().contains(cg.toString()), e.getMessage());
            assertEquals("", Files.readString(cg.resolve("devices.deny")));
            assertEquals("", Files.readString(cg.resolve("devices.allow")));
        } finally {
            Adv.run("umount", cg.toString());
        }
    }

    @Test
    void aSecondMountOfTheSameHierarchyIsTheSameCgroup() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm");
        List<String> hostList = list(cg);
        Path mnt = Files.createTempDirectory("gpx-adv-mnt");
        try {
            Adv.run("mount", "-t", "cgroup", "-o", "devices", "gpx-adv", mnt.toString());
            try {
                Path other = mnt.resolve(cg.getFileName());
                Fence a = iso.fence(cg, alloc(nv, 0));
                Fence b;
                try {
                    b = iso.fence(other, alloc(nv, 1));
                } catch (IsolationException refused) {
                    a.revoke();
                    assertEquals(hostList, list(cg));
                    return;
                }
                assertEquals(List.of(host.nv(1)), nvOpen(cg));
                b.revoke();
                a.revoke();
                assertEquals(hostList, list(cg), "two spellings of one cgroup stacked two fences");
            } finally {
                Adv.run("umount", mnt.toString());
            }
        } finally {
            Files.delete(mnt);
        }
    }

    @Test
    void fenceTwiceRevokeTwiceFenceAfterRevokeAndUseAfterClose() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 195:255 rw");
        List<String> hostList = list(cg);
        Fence f1 = iso.fence(cg, alloc(nv, 0));
        Fence f2 = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        f2.revoke();
        f2.revoke();
        f1.revoke();
        assertEquals(hostList, list(cg));
        assertEquals(host.nvNodes(), nvOpen(cg));
        Fence f3 = iso.fence(cg, alloc(nv, 2));
        assertEquals(List.of(host.nv(2)), nvOpen(cg));
        f3.close();
        assertEquals(hostList, list(cg));
        for (Fence dead : List.of(f1, f2, f3)) {
            try {
                dead.update(alloc(nv, 3));
            } catch (IsolationException | IllegalStateException expected) {
                assertEquals(hostList, list(cg), "a refused update after close changed the cgroup");
                continue;
            }
            // it took the update: then it must say so and be revocable
            assertTrue(dead.isActive(), "update after close fenced the cgroup but the fence says it is inactive");
            assertEquals(List.of(host.nv(3)), nvOpen(cg));
            dead.revoke();
            assertEquals(hostList, list(cg));
        }
    }

    @Test
    void concurrentFenceUpdateRevokeOnOneCgroup_endsAtTheHostPolicy() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 195:255 rw", "c 1:3 rwm");
        List<String> hostList = list(cg);
        List<Fence> fences = Collections.synchronizedList(new ArrayList<>());
        ExecutorService ex = Executors.newFixedThreadPool(4);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            int seed = t;
            fs.add(ex.submit(() -> {
                Random r = new Random(seed);
                go.await();
                for (int i = 0; i < 12; i++) {
                    try {
                        Fence f = iso.fence(cg, alloc(nv, r.nextInt(4)));
                        fences.add(f);
                        f.update(alloc(nv, r.nextInt(4)));
                        if (r.nextBoolean()) {
                            f.revoke();
                        }
                    } catch (IsolationException | IllegalStateException tolerated) {
                        // a fence revoked by another thread may refuse
                    }
                }
                return null;
            }));
        }
        go.countDown();
        for (Future<?> f : fs) {
            f.get(60, TimeUnit.SECONDS);
        }
        ex.shutdown();
        for (Fence f : fences) {
            f.revoke();
        }
        assertEquals(hostList, list(cg), "after every fence was revoked the cgroup is not back to the host's");
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void amdOnV1_otherGpusRenderAndCardNodesAreDenied() throws Exception {
        CgroupDeviceIsolator amd = host.amd().mechanism(CgroupDeviceIsolator.Mechanism.V1).build();
        List<GpuDevice> ad = Adv.amdDevices();
        List<Path> nodes = List.of(host.render(0), host.render(1), host.card(0), host.card(1), host.kfd());
        for (boolean containerHost : new boolean[]{false, true}) {
            Path cg = cg();
            if (containerHost) {
                container(cg, "c 226:* rwm", "c " + Adv.KFD_MAJOR + ":* rwm");
            }
            List<String> hostList = list(cg);
            Fence f = amd.fence(cg, alloc(ad, 0));
            assertEquals(List.of(host.render(0), host.card(0), host.kfd()), openable(List.of(cg), nodes),
                    containerHost ? "container host" : "default-allow host");
            f.update(alloc(ad, 1));
            assertEquals(List.of(host.render(1), host.card(1), host.kfd()), openable(List.of(cg), nodes));
            f.revoke();
            assertEquals(hostList, list(cg));
            assertEquals(nodes, openable(List.of(cg), nodes));
        }
    }

    @Test
    void strictOnDefaultAllowIsRefusedBeforeAnyWrite_andOnAContainerIsAnAllowList() throws Exception {
        CgroupDeviceIsolator strict = host.nvidia().mechanism(CgroupDeviceIsolator.Mechanism.V1)
                .strict(CgroupDeviceIsolator.DEFAULT_BASE_ALLOW).build();
        Path open = cg();
        assertThrows(IsolationException.class, () -> strict.fence(open, alloc(nv, 0)));
        assertEquals(List.of("a *:* rwm"), list(open));
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 1:3 rwm", "c 1:5 rwm", "c 7:* rwm");
        List<String> hostList = list(cg);
        Fence f = strict.fence(cg, alloc(nv, 1));
        List<Path> all = new ArrayList<>(host.nvNodes());
        all.add(host.dev.resolve("other"));
        assertEquals(List.of(host.nv(1)), openable(List.of(cg), all));
        f.revoke();
        assertEquals(hostList, list(cg));
    }

    @Test
    void aHostRuleNoFenceCanBeExactUnder_isRefusedBeforeAnyWrite() throws Exception {
        Path cg = cg();
        container(cg, "c *:* rw");
        List<String> hostList = list(cg);
        IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(cg, alloc(nv, 0)));
        assertTrue(e.getMessage().contains("*:*"), "names the rule: " + e.getMessage());
        assertEquals(hostList, list(cg));
        Path cgB = cg();
        container(cgB, "b *:* rwm", "c 195:* rwm");
        List<String> hostB = list(cgB);
        try {
            Fence f = iso.fence(cgB, alloc(nv, 0));
            assertEquals(List.of(host.nv(0)), nvOpen(cgB));
            f.revoke();
        } catch (IsolationException refused) {
            fail("a block-device wildcard cannot reach a GPU char node, yet the fence was refused: "
                    + refused.getMessage());
        }
        assertEquals(hostB, list(cgB));
    }

    @Test
    void aContainerFenceLeftByAKilledChildJvm_revokeOfTheNextFenceGivesBackTheHostList() throws Exception {
        // docs/ISOLATION.md: the dead-fencer limit is for default-allow only; container cgroups "do not have this limit"
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 195:255 rw", "c 1:3 rwm");
        List<String> hostList = list(cg);
        V2AttackTest.killedChildFences(host, cg, "V1", 0);
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        Fence f = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        f.revoke();
        assertEquals(hostList, list(cg), "revoke gave back the dead fence's list, not the host's");
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void aContainerThatNeverAllowedAGpu_aKilledFencersGrantDoesNotOutliveTheNextRevoke() throws Exception {
        Path cg = cg();
        container(cg, "c 195:255 rw", "c 1:3 rwm");
        List<String> hostList = list(cg);
        V2AttackTest.killedChildFences(host, cg, "V1", 0);
        Fence f = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        f.revoke();
        assertEquals(List.of(), nvOpen(cg), "after revoke the job opens a GPU the host never allowed");
        assertEquals(hostList, list(cg));
    }

    @Test
    void twoSpellingsOfOnePath_areOneFenceOrRefused_andRevokeGivesBackTheHostList() throws Exception {
        Path cg = cg();
        container(cg, "c 195:* rwm", "c 195:255 rw");
        List<String> hostList = list(cg);
        Fence a = iso.fence(cg, alloc(nv, 0));
        for (Path other : List.of(cg.resolve("."), Path.of(cg + "/"), V1.resolve("x/..").resolve(cg.getFileName()))) {
            List<String> before = list(cg);
            try {
                Fence b = iso.fence(other, alloc(nv, 1));
                assertEquals(List.of(host.nv(1)), nvOpen(cg));
                b.revoke();
                assertEquals(hostList, list(cg), "revoke through " + other);
            } catch (IsolationException refused) {
                assertEquals(before, list(cg), "a refused fence through " + other + " changed the cgroup");
            }
        }
        a.revoke();
        assertEquals(hostList, list(cg));
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void theHostRecordExistsOnlyWhileFenced_andAStateDirOthersCanWriteIsRefusedBeforeAnyWrite() throws Exception {
        Path state = Files.createTempDirectory("gpx-adv-state");
        try {
            Files.setPosixFilePermissions(state, java.nio.file.attribute.PosixFilePermissions.fromString("rwx------"));
            CgroupDeviceIsolator own = host.nvidia().mechanism(CgroupDeviceIsolator.Mechanism.V1).stateDir(state)
                    .build();
            Path cg = cg();
            container(cg, "c 195:* rwm", "c 1:3 rwm");
            List<String> hostList = list(cg);
            Fence f = own.fence(cg, alloc(nv, 0));
            try (var s = Files.list(state)) {
                List<Path> recs = s.filter(p -> p.getFileName().toString().startsWith("v1-")).toList();
                assertEquals(1, recs.size(), "one record while fenced: " + recs);
                assertTrue(Files.readString(recs.get(0)).contains("c 195:* rwm"), Files.readString(recs.get(0)));
            }
            f.revoke();
            try (var s = Files.list(state)) {
                assertEquals(List.of(), s.toList(), "the record (or its lock file) outlived revoke");
            }
            Files.setPosixFilePermissions(state, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
            IsolationException e = assertThrows(IsolationException.class, () -> own.fence(cg, alloc(nv, 0)));
            assertTrue(e.getMessage().contains(state.toString()), e.getMessage());
            assertEquals(hostList, list(cg));
        } finally {
            try (var s = Files.list(state)) {
                for (Path p : s.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(state);
        }
    }
}
