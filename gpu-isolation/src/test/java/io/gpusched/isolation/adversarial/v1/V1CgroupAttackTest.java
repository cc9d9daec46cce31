package io.gpusched.isolation.adversarial.v1;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import io.gpusched.isolation.IsolationException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Adversarial review of issue 25 items 3, 8, 9, 10 (v1 isolation), written from docs/ISOLATION.md and the public
 * Javadoc only. Every check reads the kernel ({@code devices.list}) or opens the fake nodes from a shell in the cgroup.
 */
@Tag("cgroup")
@Tag("adversarial")
class V1CgroupAttackTest {
    V1Cgroup bed;
    final List<Process> children = new ArrayList<>();
    final List<Fence> fences = new ArrayList<>();
    final List<Path> mounts = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (Process p : children) {
            p.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        for (Fence f : fences) {
            try {
                f.revoke();
            } catch (RuntimeException ignored) {
                // reported by the test
            }
        }
        for (Path m : mounts) {
            V1Cgroup.run("umount", m.toString());
        }
        if (bed != null) {
            bed.close();
        }
    }

    Path state() throws Exception {
        return Files.createDirectories(bed.dir.resolve("state"));
    }

    Fence track(Fence f) {
        fences.add(f);
        return f;
    }

    /** Starts the project's child JVM that fences {@code cg} for {@code gpu} and stalls after write n (0: after). */
    Process killedFencer(Path cg, Path state, int gpu, int stallAfter) throws Exception {
        Process child =
                new ProcessBuilder(V1Cgroup.child("fence", cg.toString(), bed.dev.toString(), bed.proc.toString(),
                        String.valueOf(gpu), "V1", state.toString(), String.valueOf(stallAfter)))
                        .redirectErrorStream(true)
                        .start();
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
        return child;
    }

    // ---- item 9: host rules in a parent ----

    /**
     * A default-allow parent denies GPU 2 ({@code access}); the job cgroup is fenced for GPU 1, then updated to GPUs 1
     * and 2. The update must throw IsolationException naming GPU 2, the cgroup and the rule; GPU 1's fence stays.
     */
    @ParameterizedTest
    @ValueSource(strings = {"rw", "w", "r"})
    void anUpdateToAGpuTheParentDeniesIsRefusedAndTheFenceStays(String access) throws Exception {
        bed = new V1Cgroup();
        CgroupDeviceIsolator iso = bed.isolator(state());
        Path parent = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(parent, "devices.deny", "c 195:2 " + access);
        Path cg = bed.cgroup(parent);
        Fence f = track(iso.fence(cg, V1Cgroup.alloc(1)));
        Map<String, String> fenced = V1Cgroup.only(1);
        assertThat(bed.probe(cg)).isEqualTo(fenced);
        List<String> listBefore = V1Cgroup.list(cg);
        Throwable t = catchThrowable(() -> f.update(V1Cgroup.alloc(1, 2)));
        assertThat(t).as("update to a GPU the parent denies (%s)", access).isInstanceOf(IsolationException.class);
        assertThat(t.getMessage()).contains("GPU-iso-2").contains(cg.getFileName().toString()).contains("195:2");
        assertThat(bed.probe(cg)).as("the previous fence stays in force").isEqualTo(fenced);
        assertThat(V1Cgroup.list(cg)).isEqualTo(listBefore);
        assertThat(f.allocation().devices()).extracting(d -> d.index()).containsExactly(1);
        f.revoke();
        Map<String, String> host = V1Cgroup.only(0, 1, 2, 3);
        host.put("nvidia2", access.equals("rw") ? "-" : access.equals("w") ? "r" : "w");
        assertThat(bed.probe(cg)).as("revoke gives back the host policy").isEqualTo(host);
    }

    /**
     * A default-allow parent has a wildcard deny of writing every NVIDIA node ({@code c 195:* w}): fencing the child
     * for any GPU must be refused before any write, leaving the child exactly as the host made it.
     */
    @Test
    void aWildcardParentDenyRefusesTheFenceAndLeavesTheHostPolicy() throws Exception {
        bed = new V1Cgroup();
        CgroupDeviceIsolator iso = bed.isolator(state());
        Path parent = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(parent, "devices.deny", "c 195:* w");
        Path cg = bed.cgroup(parent);
        Map<String, String> host = bed.probe(cg);
        List<String> hostList = V1Cgroup.list(cg);
        Throwable t = catchThrowable(() -> track(iso.fence(cg, V1Cgroup.alloc(1))));
        assertThat(t).isInstanceOf(IsolationException.class);
        assertThat(t.getMessage()).contains(cg.getFileName().toString()).contains("195:");
        assertThat(bed.probe(cg)).isEqualTo(host);
        assertThat(V1Cgroup.list(cg)).isEqualTo(hostList);
    }

    /**
     * A default-deny (container) parent allows only GPU 1 and nvidiactl; the child copies it. A fence for GPU 1 then
     * an update to GPU 1 and 3: refused (EPERM from the kernel) naming GPU 3, previous fence in force.
     */
    @Test
    void anUpdateAContainerParentForbidsIsRefusedAndTheFenceStays() throws Exception {
        bed = new V1Cgroup();
        CgroupDeviceIsolator iso = bed.isolator(state());
        Path parent = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(parent, "devices.deny", "a");
        V1Cgroup.write(parent, "devices.allow", "c 195:1 rw");
        V1Cgroup.write(parent, "devices.allow", "c 195:255 rw");
        Path cg = bed.cgroup(parent);
        List<String> hostList = V1Cgroup.list(cg);
        Fence f = track(iso.fence(cg, V1Cgroup.alloc(1)));
        assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(1));
        List<String> fencedList = V1Cgroup.list(cg);
        Throwable t = catchThrowable(() -> f.update(V1Cgroup.alloc(1, 3)));
        assertThat(t).isInstanceOf(IsolationException.class);
        assertThat(t.getMessage()).contains("GPU-iso-3").contains(cg.getFileName().toString());
        assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(1));
        assertThat(V1Cgroup.list(cg)).isEqualTo(fencedList);
        f.revoke();
        assertThat(V1Cgroup.list(cg)).isEqualTo(hostList);
    }

    // ---- item 8: fences left by killed fencers ----

    /**
     * A child JVM fences GPU 1 on a default-allow cgroup whose own host rules deny writing GPU 3 and whose parent
     * denies reading GPU 0; it is SIGKILLed after write n (0: after its whole fence). This JVM (same state dir) then
     * fences GPU 2, updates to GPU 1, revokes: exactly the new GPU opens each time and revoke gives back the host's
     * policy exactly; no record or lock file left.
     */
    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2, 3, 4, 5})
    void aFenceLeftByAKilledJvmAtAnyWriteIsLiftedExactly(int stallAfter) throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path parent = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(parent, "devices.deny", "c 195:0 r");
        Path cg = bed.cgroup(parent);
        V1Cgroup.write(cg, "devices.deny", "c 195:3 w");
        Map<String, String> host = bed.probe(cg);
        assertThat(host).isEqualTo(Map.of("nvidia0", "w", "nvidia1", "rw", "nvidia2", "rw", "nvidia3", "r",
                "nvidiactl", "rw"));
        killedFencer(cg, state, 1, stallAfter);

        Fence f = track(iso.fence(cg, V1Cgroup.alloc(2)));
        assertThat(bed.probe(cg)).as("exactly GPU 2 opens").isEqualTo(V1Cgroup.only(2));
        f.update(V1Cgroup.alloc(1));
        assertThat(bed.probe(cg)).as("exactly GPU 1 opens").isEqualTo(V1Cgroup.only(1));
        f.revoke();
        assertThat(bed.probe(cg)).as("exactly the host's policy").isEqualTo(host);
        assertThat(V1Cgroup.list(cg)).containsExactly("a *:* rwm");
        try (var s = Files.list(state)) {
            assertThat(s.toList()).as("no record or lock left").isEmpty();
        }
    }

    /**
     * Two fencers killed one after the other (GPU 1 after its whole fence, then GPU 3 in the middle of its fence),
     * then a revoke path: a fence for GPU 0 whose revoke must give back exactly the host policy.
     */
    @Test
    void twoKilledFencersInARowAreLiftedExactly() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(cg, "devices.deny", "c 195:2 w");
        Map<String, String> host = bed.probe(cg);
        killedFencer(cg, state, 1, 0);
        killedFencer(cg, state, 3, 2);
        Fence f = track(iso.fence(cg, V1Cgroup.alloc(0)));
        assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(0));
        f.revoke();
        assertThat(bed.probe(cg)).isEqualTo(host);
    }

    // ---- item 10: three JVMs at once ----

    /**
     * Three child JVMs fence one default-allow cgroup (host denies writing GPU 3: any fence for GPU 3 must fail) 12
     * times each at the same instant. Independent checker: the final probe equals the fence of some child's last
     * acknowledged OK allocation, and every acknowledged FAIL involved GPU 3.
     */
    @Test
    void threeJvmsFencingOneCgroupEndAtOneAcknowledgedFence() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(cg, "devices.deny", "c 195:3 w");
        Map<String, String> host = bed.probe(cg);
        Path go = bed.dir.resolve("go");
        int rounds = 12;
        int n = 3;
        CountDownLatch ready = new CountDownLatch(n);
        List<List<String>> outs = new ArrayList<>();
        List<Thread> readers = new ArrayList<>();
        for (int c = 0; c < n; c++) {
            Process p =
                    new ProcessBuilder(V1Cgroup.child("fencer", cg.toString(), bed.dev.toString(), bed.proc.toString(),
                            "V1", state.toString(), go.toString(), String.valueOf(rounds), String.valueOf(100 + c)))
                            .redirectErrorStream(true).start();
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
                    // gone
                }
            });
            t.start();
            readers.add(t);
        }
        assertThat(ready.await(90, TimeUnit.SECONDS)).as("children ready: %s", outs).isTrue();
        Files.createFile(go);
        for (int c = 0; c < n; c++) {
            assertThat(children.get(c).waitFor(300, TimeUnit.SECONDS)).isTrue();
            readers.get(c).join(10_000);
        }
        List<Map<String, String>> ends = new ArrayList<>();
        for (List<String> out : outs) {
            List<String> acks = out.stream().filter(l -> l.startsWith("ACK ")).toList();
            assertThat(acks).as("%s", out).hasSize(rounds);
            for (String a : acks) {
                String[] w = a.split(" ");
                boolean has3 = Arrays.asList(w[3].split(",")).contains("3");
                assertThat(w[2]).as("ack %s", a).isEqualTo(has3 ? "FAIL" : "OK");
            }
            acks.stream().filter(a -> a.split(" ")[2].equals("OK")).reduce((a, b) -> b).ifPresent(a -> ends.add(
                    V1Cgroup.only(Arrays.stream(a.split(" ")[3].split(",")).mapToInt(Integer::parseInt).toArray())));
        }
        assertThat(ends).isNotEmpty();
        assertThat(bed.probe(cg)).as("end state is one acknowledged fence").isIn(ends);
        Fence f = track(iso.fence(cg, V1Cgroup.alloc(0)));
        f.revoke();
        assertThat(bed.probe(cg)).isEqualTo(host);
        try (var s = Files.list(state)) {
            assertThat(s.toList()).isEmpty();
        }
    }

    // ---- the state directory ----

    private static List<Path> files(Path state, String prefix) throws Exception {
        try (var s = Files.list(state)) {
            return s.filter(p -> p.getFileName().toString().startsWith(prefix)).toList();
        }
    }

    /**
     * A fencer is killed; its record is then damaged (garbage bytes). A new fence for another GPU must either do exactly
     * that GPU or fail with IsolationException leaving the dead fence in force (fail closed); never another exception
     * type, never a half state.
     */
    @Test
    void aDamagedRecordFailsClosedWithATypedException() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        killedFencer(cg, state, 1, 0);
        List<Path> records = files(state, "v1-");
        assertThat(records).as("a record of the dead fence: %s", files(state, "")).isNotEmpty();
        for (Path r : records) {
            Files.write(r, new byte[]{0, (byte) 0xff, '{', '\n', 'x', '9', '9', ':'});
        }
        Map<String, String> dead = bed.probe(cg);
        Throwable t = catchThrowable(() -> track(iso.fence(cg, V1Cgroup.alloc(2))));
        if (t == null) {
            assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(2));
        } else {
            assertThat(t).as("typed").isInstanceOf(IsolationException.class);
            assertThat(t.getMessage()).contains(cg.getFileName().toString());
            assertThat(bed.probe(cg)).as("nothing half done").isEqualTo(dead);
        }
    }

    /**
     * The record and lock file of a live fence are replaced by symlinks to a file outside the state directory. An
     * update and a revoke must never write, truncate, chmod or remove the outside file.
     */
    @Test
    void symlinkedRecordAndLockNeverReachOutside() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        Fence f = track(iso.fence(cg, V1Cgroup.alloc(1)));
        Path outside = Files.writeString(bed.dir.resolve("precious"), "precious\n");
        Files.setPosixFilePermissions(outside, PosixFilePermissions.fromString("rw-------"));
        List<Path> all = files(state, "");
        assertThat(all).isNotEmpty();
        for (Path p : all) {
            Files.delete(p);
            Files.createSymbolicLink(p, outside);
        }
        catchThrowable(() -> f.update(V1Cgroup.alloc(2)));
        catchThrowable(f::revoke);
        assertThat(Files.readString(outside)).isEqualTo("precious\n");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(outside))).isEqualTo("rw-------");
    }

    /**
     * The state directory belongs to an unprivileged user (mode rwx------, so only that user and root can write it).
     * The class Javadoc says the directory "must be root's alone: whoever can write a record chooses what revoke
     * restores". A dead fencer's record lies there; the new fence must refuse with IsolationException naming the
     * directory, writing nothing.
     */
    @Test
    void aStateDirectoryOwnedByAnotherUserIsRefused() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        killedFencer(cg, state, 1, 0);
        V1Cgroup.run("chown", "-R", "65534:65534", state.toString());
        Throwable t = catchThrowable(() -> track(iso.fence(cg, V1Cgroup.alloc(2))));
        assertThat(t).as("a state directory owned by uid 65534 is trusted").isInstanceOf(IsolationException.class);
        assertThat(t.getMessage()).contains(state.toString());
        assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(1));
    }

    /** A state directory others can write (rwxrwxrwx) is refused before any rule write. */
    @Test
    void anOtherWritableStateDirectoryIsRefused() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        killedFencer(cg, state, 1, 0);
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwxrwxrwx"));
        Throwable t = catchThrowable(() -> track(iso.fence(cg, V1Cgroup.alloc(2))));
        assertThat(t).isInstanceOf(IsolationException.class);
        assertThat(t.getMessage()).contains(state.toString());
        assertThat(bed.probe(cg)).isEqualTo(V1Cgroup.only(1));
        Files.setPosixFilePermissions(state, PosixFilePermissions.fromString("rwx------"));
    }

    /**
     * The state directory lies on a full tmpfs: the record cannot be written, so the fence must fail with
     * IsolationException before any rule write; the cgroup stays exactly as the host made it.
     */
    @Test
    void aFullStateDirectoryRefusesTheFenceBeforeAnyWrite() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        V1Cgroup.run("mount", "-t", "tmpfs", "-o", "size=64k", "r25tmp", state.toString());
        mounts.add(state);
        try {
            V1Cgroup.run("dd", "if=/dev/zero", "of=" + state.resolve("fill"), "bs=4k", "count=100");
        } catch (java.io.IOException full) {
            // the fill stops when the tmpfs is full, as meant
        }
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        V1Cgroup.write(cg, "devices.deny", "c 195:0 w");
        Map<String, String> host = bed.probe(cg);
        Throwable t = catchThrowable(() -> track(iso.fence(cg, V1Cgroup.alloc(1))));
        assertThat(t).isInstanceOf(IsolationException.class);
        assertThat(bed.probe(cg)).isEqualTo(host);
        assertThat(V1Cgroup.list(cg)).containsExactly("a *:* rwm");
        Files.delete(state.resolve("fill"));
    }

    /** A cgroup removed while fenced: update must throw IsolationException (typed), revoke is quiet and inactive. */
    @Test
    void aCgroupRemovedWhileFencedRefusesUpdateAndLeavesNothing() throws Exception {
        bed = new V1Cgroup();
        Path state = state();
        CgroupDeviceIsolator iso = bed.isolator(state);
        Path cg = bed.cgroup(V1Cgroup.V1);
        Fence f = iso.fence(cg, V1Cgroup.alloc(1));
        Files.delete(cg);
        Throwable t = catchThrowable(() -> f.update(V1Cgroup.alloc(2)));
        assertThat(t).isInstanceOf(IsolationException.class);
        f.revoke();
        assertThat(f.isActive()).isFalse();
        try (var s = Files.list(state)) {
            assertThat(s.toList()).isEmpty();
        }
    }
}
