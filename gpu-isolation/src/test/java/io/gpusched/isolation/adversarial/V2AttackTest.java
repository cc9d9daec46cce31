package io.gpusched.isolation.adversarial;

import static io.gpusched.isolation.adversarial.Adv.V2;
import static io.gpusched.isolation.adversarial.Adv.alloc;
import static io.gpusched.isolation.adversarial.Adv.attachedPrograms;
import static io.gpusched.isolation.adversarial.Adv.openable;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.GpuDevice;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import io.gpusched.isolation.IsolationException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
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

/** Attacks on cgroup v2 fences: foreign programs, dead fencers, re-created cgroups, children, concurrency. */
@Tag("adversarial")
class V2AttackTest {
    private Adv.Host host;
    private final List<Path> cgroups = new ArrayList<>();
    private final List<GpuDevice> nv = Adv.nvDevices();
    private CgroupDeviceIsolator iso;

    @BeforeEach
    void setUp() throws Exception {
        Adv.assumeV2();
        host = new Adv.Host();
        iso = host.nvidia().mechanism(CgroupDeviceIsolator.Mechanism.V2).build();
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
        Path p = Adv.mkCgroup(V2);
        cgroups.add(p);
        return p;
    }

    private List<Path> nvOpen(Path cg) throws Exception {
        return openable(List.of(cg), host.nvNodes());
    }

    @Test
    void aForeignProgramIsKeptThroughFenceUpdateAndRevoke() throws Exception {
        Path cg = cg();
        Adv.attachForeignDeny(cg, "hostrt_dev", 195, 3);
        assertEquals(1, attachedPrograms(cg));
        assertEquals(List.of(host.nv(0), host.nv(1), host.nv(2)), nvOpen(cg));
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertEquals(2, attachedPrograms(cg));
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        for (int i = 0; i < 20; i++) {
            f.update(alloc(nv, i % 3));
        }
        assertEquals(2, attachedPrograms(cg));
        // the host program denies GPU 3: an update to it is refused (issue 25 item 9) and the fence of GPU 1 stays
        IsolationException e = assertThrows(IsolationException.class, () -> f.update(alloc(nv, 3)));
        assertTrue(e.getMessage().contains("GPU 3") && e.getMessage().contains(cg.toString()), e.getMessage());
        assertEquals(List.of(host.nv(1)), nvOpen(cg), "the host program's deny of GPU 3 must keep applying");
        f.revoke();
        assertEquals(1, attachedPrograms(cg), "revoke detached the host's program");
        assertEquals(List.of(host.nv(0), host.nv(1), host.nv(2)), nvOpen(cg));
    }

    /**
     * Issue 25 item 9 on cgroup v2: device programs of the host on the job cgroup (denies GPU 3) and on its parent
     * (denies GPU 2). A fence or an update for either GPU fails naming the GPU and the cgroup; the previous fence
     * (or, for a fence, no program of ours) stays in force, checked by opening the nodes and counting programs.
     */
    @Test
    void issue25_aGpuAHostProgramDeniesIsRefused_andThePreviousFenceStays() throws Exception {
        Path parent = cg();
        Path job = Files.createDirectory(parent.resolve("job"));
        cgroups.add(job);
        Adv.attachForeignDeny(parent, "hostrt_dev", 195, 2);
        Adv.attachForeignDeny(job, "hostrt_dev", 195, 3);
        assertEquals(List.of(host.nv(0), host.nv(1)), nvOpen(job));
        IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(job, alloc(nv, 2)));
        assertTrue(e.getMessage().contains("GPU 2 GPU-adv-2") && e.getMessage().contains(job.toString())
                && e.getMessage().contains("program"), e.getMessage());
        assertEquals(1, attachedPrograms(job), "a refused fence leaves no program of ours");
        assertEquals(List.of(host.nv(0), host.nv(1)), nvOpen(job));

        Fence f = iso.fence(job, alloc(nv, 0));
        assertEquals(List.of(host.nv(0)), nvOpen(job));
        for (int[] refused : new int[][]{{0, 2}, {3}, {1, 3}}) {
            IsolationException u = assertThrows(IsolationException.class, () -> f.update(alloc(nv, refused)));
            String gpu = "GPU " + refused[refused.length - 1] + " GPU-adv-" + refused[refused.length - 1];
            assertTrue(u.getMessage().contains(gpu) && u.getMessage().contains(job.toString())
                    && u.getMessage().contains("previous program is back"), u.getMessage());
            assertEquals(alloc(nv, 0).devices(), f.allocation().devices());
            assertEquals(List.of(host.nv(0)), nvOpen(job), "after a refused update to " + gpu);
            assertEquals(2, attachedPrograms(job));
        }
        f.update(alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(job));
        f.revoke();
        assertEquals(1, attachedPrograms(job));
        assertEquals(List.of(host.nv(0), host.nv(1)), nvOpen(job));
    }

    @Test
    void aFenceLeftByAKilledChildJvmIsReplaced_andRevokeLeavesNoneOfOurs() throws Exception {
        Path cg = cg();
        Adv.attachForeignDeny(cg, "hostrt_dev", 195, 2);
        killedChildFences(host, cg, "V2", 0);
        assertEquals(2, attachedPrograms(cg));
        assertEquals(List.of(host.nv(0)), nvOpen(cg));
        Fence f = iso.fence(cg, alloc(nv, 1));
        assertEquals(2, attachedPrograms(cg), "the dead fencer's program stacked with ours");
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        f.revoke();
        assertEquals(1, attachedPrograms(cg));
        assertEquals(List.of(host.nv(0), host.nv(1), host.nv(3)), nvOpen(cg));
    }

    static void killedChildFences(Adv.Host host, Path cg, String mechanism, int gpu) throws Exception {
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(java.toString(), "-cp", System.getProperty("java.class.path"),
                AdvChild.class.getName(), host.dev.toString(), host.proc.toString(), cg.toString(), mechanism,
                String.valueOf(gpu))
                .redirectErrorStream(true).start();
        try {
            var in = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream()));
            StringBuilder seen = new StringBuilder();
            String l;
            while ((l = in.readLine()) != null && !l.equals("FENCED")) {
                seen.append(l).append('\n');
            }
            assertEquals("FENCED", l, "child did not fence: " + seen);
        } finally {
            p.destroyForcibly();
            p.waitFor(20, TimeUnit.SECONDS);
        }
    }

    @Test
    void aRecreatedCgroupIsFencedFresh_andTheStaleFenceTouchesNothing() throws Exception {
        Path cg = cg();
        Fence stale = iso.fence(cg, alloc(nv, 0));
        Files.delete(cg);
        Files.createDirectory(cg);
        assertEquals(0, attachedPrograms(cg));
        Fence fresh = iso.fence(cg, alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        IsolationException e = assertThrows(IsolationException.class, () -> stale.update(alloc(nv, 2)));
        assertTrue(e.getMessage().contains(cg.toString()), e.getMessage());
        stale.revoke();
        assertFalse(stale.isActive());
        assertEquals(1, attachedPrograms(cg));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        fresh.update(alloc(nv, 2, 3));
        assertEquals(List.of(host.nv(2), host.nv(3)), nvOpen(cg));
        fresh.revoke();
        assertEquals(0, attachedPrograms(cg));
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void childCgroupsAreFencedToo() throws Exception {
        Path cg = cg();
        Path kid = Files.createDirectory(cg.resolve("kid"));
        cgroups.add(kid);
        Fence f = iso.fence(cg, alloc(nv, 0));
        assertEquals(List.of(host.nv(0)), nvOpen(kid));
        f.update(alloc(nv, 1));
        assertEquals(List.of(host.nv(1)), nvOpen(kid));
        f.revoke();
        assertEquals(host.nvNodes(), nvOpen(kid));
    }

    @Test
    void fenceTwiceRevokeTwiceFenceAfterRevokeAndUseAfterClose() throws Exception {
        Path cg = cg();
        Fence f1 = iso.fence(cg, alloc(nv, 0));
        Fence f2 = iso.fence(cg, alloc(nv, 1));
        assertEquals(1, attachedPrograms(cg));
        assertEquals(List.of(host.nv(1)), nvOpen(cg));
        f2.revoke();
        f2.revoke();
        f1.revoke();
        assertEquals(0, attachedPrograms(cg));
        Fence f3 = iso.fence(cg, alloc(nv, 2));
        assertEquals(List.of(host.nv(2)), nvOpen(cg));
        f3.close();
        for (Fence dead : List.of(f1, f2, f3)) {
            try {
                dead.update(alloc(nv, 3));
            } catch (IsolationException | IllegalStateException expected) {
                assertEquals(0, attachedPrograms(cg), "a refused update after close attached a program");
                continue;
            }
            assertTrue(dead.isActive(), "update after close fenced the cgroup but the fence says it is inactive");
            assertEquals(List.of(host.nv(3)), nvOpen(cg));
            dead.revoke();
            assertEquals(0, attachedPrograms(cg));
        }
        assertEquals(host.nvNodes(), nvOpen(cg));
    }

    @Test
    void concurrentFenceUpdateRevokeOnOneCgroup_endsWithNoProgramOfOurs() throws Exception {
        Path cg = cg();
        Adv.attachForeignDeny(cg, "hostrt_dev", 195, 3);
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
        assertEquals(1, attachedPrograms(cg), "programs left after every fence was revoked");
        assertEquals(List.of(host.nv(0), host.nv(1), host.nv(2)), nvOpen(cg));
    }

    @Test
    void amdOnV2_otherGpusRenderAndCardNodesAreDenied() throws Exception {
        CgroupDeviceIsolator amd = host.amd().mechanism(CgroupDeviceIsolator.Mechanism.V2).build();
        List<GpuDevice> ad = Adv.amdDevices();
        List<Path> nodes = List.of(host.render(0), host.render(1), host.card(0), host.card(1), host.kfd());
        Path cg = cg();
        Fence f = amd.fence(cg, alloc(ad, 0));
        assertEquals(List.of(host.render(0), host.card(0), host.kfd()), openable(List.of(cg), nodes));
        f.update(alloc(ad, 1));
        assertEquals(List.of(host.render(1), host.card(1), host.kfd()), openable(List.of(cg), nodes));
        f.revoke();
        assertEquals(nodes, openable(List.of(cg), nodes));
    }

    @Test
    void badPathsAreRefusedWithATypedErrorNamingThem() throws Exception {
        Path missing = V2.resolve("gpx-adv-missing-" + System.nanoTime());
        IsolationException e = assertThrows(IsolationException.class, () -> iso.fence(missing, alloc(nv, 0)));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        Path cg = cg();
        Adv.run("mount", "-t", "tmpfs", "-o", "size=1m", "gpx-adv-fake2", cg.toString());
        try {
            Files.writeString(cg.resolve("cgroup.procs"), "");
            Files.writeString(cg.resolve("cgroup.controllers"), "");
            e = assertThrows(IsolationException.class, () -> iso.fence(cg, alloc(nv, 0)));
            assertTrue(e.getMessage().contains(cg.toString()), e.getMessage());
        } finally {
            Adv.run("umount", cg.toString());
        }
    }

    @Test
    void twoSpellingsOfOnePath_leaveExactlyOneProgramAndNoneAfterRevoke() throws Exception {
        Path cg = cg();
        Fence a = iso.fence(cg, alloc(nv, 0));
        Fence b = null;
        try {
            b = iso.fence(cg.resolve("."), alloc(nv, 1));
            assertEquals(1, attachedPrograms(cg));
            assertEquals(List.of(host.nv(1)), nvOpen(cg));
        } catch (IsolationException refused) {
            assertEquals(List.of(host.nv(0)), nvOpen(cg));
        }
        if (b != null) {
            b.revoke();
        }
        a.revoke();
        assertEquals(0, attachedPrograms(cg));
        assertEquals(host.nvNodes(), nvOpen(cg));
    }
}
