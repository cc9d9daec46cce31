package io.gpusched.isolation;

import static io.gpusched.isolation.CgroupBed.nv;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Fences of one cgroup v1 made by several processes (issue 25 items 8 and 10), on real cgroups with child JVMs: a
 * fencer killed with SIGKILL (after its fence, or between two of its rule writes) on a default-allow cgroup, and two
 * JVMs fencing one cgroup (v1 or v2) at the same instant. Checked by opening the nodes from a shell in the cgroup and by reading
 * {@code devices.list}, never by asking the isolator.
 */
@Tag("cgroup")
class CrossProcessFenceTest {
    @TempDir
    Path dir;
    CgroupBed bed;
    final List<Process> children = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (Process p : children) {
            p.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        if (bed != null) {
            bed.close();
        }
    }

    Path stateDir() throws Exception {
        return Files.createDirectories(dir.resolve("state"));
    }

    /**
     * A default-allow cgroup whose host denies writing GPU 0 (hidden in devices.list). A child JVM fences it for GPU 1
     * and is killed with SIGKILL: after its fence ({@code 0}), or right after its first or second rule write. A fence
     * for GPU 2 by this JVM must open exactly GPU 2 (the dead fence's denies are lifted, its GPU 1 is denied), and its
     * revoke must give back exactly the host's policy: GPU 0 readable not writable, GPUs 1-3 open.
     */
    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2})
    void issue25_aDefaultAllowFenceLeftByAKilledJvmIsLiftedExactly(int stallAfter) throws Exception {
        bed = new CgroupBed(dir, false);
        Path state = stateDir();
        CgroupDeviceIsolator iso = CgroupBed.usable(bed.builder(Mechanism.V1).stateDir(state).build(), Mechanism.V1);
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V1));
        CgroupBed.write(cg, "devices.deny", "c 195:0 w");
        Map<String, String> host = bed.probe(cg);
        assertThat(host).isEqualTo(Map.of("nvidia0", "r", "nvidia1", "rw", "nvidia2", "rw", "nvidia3", "rw",
                "nvidiactl", "rw"));

        Process child = new ProcessBuilder(IsolationChild.command("fence", cg.toString(), bed.dev.toString(),
                bed.proc.toString(), "1", "V1", state.toString(), String.valueOf(stallAfter)))
                .redirectErrorStream(true).start();
        children.add(child);
        BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        String line = r.readLine();
        for (; line != null && !line.equals("FENCED") && !line.startsWith("STALLED"); line = r.readLine()) {
            seen.append(line).append('\n');
        }
        assertThat(line).as("the child fenced or stalled: %s", seen).isNotNull();
        child.destroyForcibly();
        assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
        if (stallAfter == 0) {
            assertThat(bed.probe(cg)).as("the dead JVM's fence stays").isEqualTo(bed.only(nv(1)));
        }

        Fence f = bed.track(iso.fence(cg, bed.gpus(2)));
        assertThat(bed.probe(cg)).as("GPU 2 opens; the dead fence's GPU 1 does not").isEqualTo(bed.only(nv(2)));
        f.update(bed.gpus(1, 3));
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(1, 3)));
        f.revoke();
        assertThat(bed.probe(cg)).as("exactly the host's policy, its own deny kept").isEqualTo(host);
        assertThat(CgroupBed.list(cg)).containsExactly("a *:* rwm");
        try (var s = Files.list(state)) {
            assertThat(s.toList()).as("no record or lock file outlives the revoke").isEmpty();
        }
    }

    /**
     * Two child JVMs fence the same cgroup (v1 default-allow, v1 container, v2) at the same instant, 25 times each,
     * one or two random GPUs a time. Every call must succeed, and at the end the cgroup must be exactly the fence of
     * one child's last acknowledged allocation: the nodes that open (probed), on a container cgroup the whole
     * {@code devices.list} (the host's list plus that allocation's nodes, computed here), on v2 exactly one program of
     * ours. A fence and revoke by this JVM then gives back exactly the host's policy.
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.EnumSource(Setup.class)
    void issue25_twoJvmsFencingOneCgroupAtOnceEndAtOneOfTheirFences(Setup setup) throws Exception {
        bed = new CgroupBed(dir, false);
        Path state = stateDir();
        boolean container = setup == Setup.V1_CONTAINER;
        Mechanism m = setup == Setup.V2 ? Mechanism.V2 : Mechanism.V1;
        CgroupDeviceIsolator iso = CgroupBed.usable(bed.builder(m).stateDir(state).build(), m);
        Path cg = bed.cgroup(CgroupBed.root(iso, m));
        if (container) {
            CgroupBed.write(cg, "devices.deny", "a");
            CgroupBed.write(cg, "devices.allow", "c 1:3 rwm");
            CgroupBed.write(cg, "devices.allow", "c 195:255 rw");
        }
        List<String> hostList = m == Mechanism.V1 ? CgroupBed.list(cg) : List.of();
        Map<String, String> hostSeen = bed.probe(cg);
        Path go = dir.resolve("go");
        int rounds = 25;
        CountDownLatch ready = new CountDownLatch(2);
        List<List<String>> outs = new ArrayList<>();
        List<Thread> readers = new ArrayList<>();
        for (int c = 0; c < 2; c++) {
            Process p = new ProcessBuilder(IsolationChild.command("fencer", cg.toString(), bed.dev.toString(),
                    bed.proc.toString(), m.name(), state.toString(), go.toString(), String.valueOf(rounds),
                    String.valueOf(c + 1))).redirectErrorStream(true).start();
            children.add(p);
            List<String> out = Collections.synchronizedList(new ArrayList<>());
            outs.add(out);
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                        StandardCharsets.UTF_8))) {
                    for (String l = r.readLine(); l != null; l = r.readLine()) {
                        out.add(l);
                        if (l.equals("READY")) {
                            ready.countDown();
                        }
                    }
                } catch (java.io.IOException ignored) {
                    // the child is gone
                }
            });
            t.start();
            readers.add(t);
        }
        assertThat(ready.await(60, TimeUnit.SECONDS)).as("both children ready: %s", outs).isTrue();
        Files.createFile(go);
        for (int c = 0; c < 2; c++) {
            assertThat(children.get(c).waitFor(300, TimeUnit.SECONDS)).as("child %d finished", c).isTrue();
            readers.get(c).join(10_000);
        }

        List<String> lastOk = new ArrayList<>();
        for (List<String> out : outs) {
            List<String> acks = out.stream().filter(l -> l.startsWith("ACK ")).toList();
            assertThat(acks).as("every call acknowledged: %s", out).hasSize(rounds);
            assertThat(acks).as("no call failed").allMatch(l -> l.split(" ")[2].equals("OK"));
            assertThat(out).contains("DONE");
            lastOk.add(acks.get(acks.size() - 1).split(" ")[3]);
        }
        List<Map<String, String>> allowedEnds = new ArrayList<>();
        List<List<String>> listEnds = new ArrayList<>();
        for (String ids : lastOk) {
            int[] gpus = Arrays.stream(ids.split(",")).mapToInt(Integer::parseInt).toArray();
            allowedEnds.add(bed.only(nv(gpus)));
            TreeSet<String> l = new TreeSet<>(hostList);
            for (int g : gpus) {
                l.add("c 195:" + g + " rw");
            }
            listEnds.add(List.copyOf(l));
        }
        assertThat(bed.probe(cg)).as("the end state is one child's last fence %s", lastOk).isIn(allowedEnds);
        if (container) {
            assertThat(CgroupBed.list(cg)).as("the whole list is one child's last fence %s", lastOk).isIn(listEnds);
        }
        if (m == Mechanism.V2) {
            assertThat(CgroupIsolationTest.ourPrograms(cg)).as("exactly one program of ours").isEqualTo(1);
        }
        System.out.println("TWO-JVMS " + setup + ": " + rounds + " fences each, all OK, end state = fence"
                + " of " + lastOk);

        Fence f = bed.track(iso.fence(cg, bed.gpus(0)));
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(0)));
        f.revoke();
        if (m == Mechanism.V1) {
            assertThat(CgroupBed.list(cg)).isEqualTo(hostList);
        } else {
            assertThat(CgroupIsolationTest.ourPrograms(cg)).isZero();
        }
        assertThat(bed.probe(cg)).isEqualTo(hostSeen);
        try (var s = Files.list(state)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    /**
     * Cgroups removed while fenced (default-allow and container): the fences' revoke finds them gone, and their records
     * and lock files go with them; nothing is left in the state directory.
     */
    @org.junit.jupiter.api.Test
    void issue25_aCgroupRemovedWhileFencedLeavesNoRecordOrLockFile() throws Exception {
        bed = new CgroupBed(dir, false);
        Path state = stateDir();
        CgroupDeviceIsolator iso = CgroupBed.usable(bed.builder(Mechanism.V1).stateDir(state).build(), Mechanism.V1);
        Path root = CgroupBed.root(iso, Mechanism.V1);
        Path allow = bed.cgroup(root);
        Path deny = bed.cgroup(root);
        CgroupBed.write(deny, "devices.deny", "a");
        CgroupBed.write(deny, "devices.allow", "c 195:255 rw");
        List<Fence> fences = List.of(iso.fence(allow, bed.gpus(1)), iso.fence(deny, bed.gpus(2)));
        try (var s = Files.list(state)) {
            assertThat(s.filter(p -> p.getFileName().toString().startsWith("v1-")).count()).isEqualTo(2);
        }
        Files.delete(allow);
        Files.delete(deny);
        for (Fence f : fences) {
            f.revoke();
            assertThat(f.isActive()).isFalse();
        }
        try (var s = Files.list(state)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    /** The cgroups two JVMs race on. */
    enum Setup {
        V1_DEFAULT_ALLOW, V1_CONTAINER, V2
    }
}
