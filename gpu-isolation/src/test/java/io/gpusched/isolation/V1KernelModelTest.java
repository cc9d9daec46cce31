package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.isolation.internal.Libc;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The v1 emulator checked against the real kernel (random writes to a parent and a child cgroup: same answers, same
 * lists, same opens), and the fence's write plans checked against the emulator: over random states, every prefix of
 * a plan (and of its undo) admits nothing outside old ∪ new, and the plan ends exactly at the new state.
 */
class V1KernelModelTest {
    static final int[] BITS = {V1Fence.R, V1Fence.W, V1Fence.M};

    @TempDir
    Path dir;
    CgroupBed bed;

    @AfterEach
    void tearDown() throws Exception {
        if (bed != null) {
            bed.close();
        }
    }

    static String randomLine(Random rnd) {
        if (rnd.nextInt(20) == 0) {
            return "a";
        }
        char type = rnd.nextInt(5) == 0 ? 'b' : 'c';
        int[] majors = {195, 226, V1KernelModel.ANY};
        int[] minors = {0, 1, V1KernelModel.ANY};
        int major = majors[rnd.nextInt(majors.length)];
        int minor = minors[rnd.nextInt(minors.length)];
        return new V1Fence.Key(type, major, minor).line(1 + rnd.nextInt(7));
    }

    static int kernelWrite(Path cg, boolean allowFile, String line) {
        try {
            Files.writeString(cg.resolve(allowFile ? "devices.allow" : "devices.deny"), line);
            return V1KernelModel.OK;
        } catch (IOException e) {
            String m = String.valueOf(e.getMessage());
            return m.contains("not permitted") ? V1KernelModel.EPERM : m.contains("Invalid argument")
                    ? V1KernelModel.EINVAL : -1;
        }
    }

    @Test
    @Tag("cgroup")
    void theEmulatorAnswersAsTheKernelDoes() throws Exception {
        bed = new CgroupBed(dir, false);
        Libc libc = Libc.Holder.get();
        libc.mknod(bed.dev.resolve("drm0").toString(), Libc.S_IFCHR | 0666, Libc.makedev(226, 0));
        libc.mknod(bed.dev.resolve("drm1").toString(), Libc.S_IFCHR | 0666, Libc.makedev(226, 1));
        bed.nodes.clear();
        bed.nodes.addAll(List.of("nvidia0", "nvidia1", "drm0", "drm1"));
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V1);
        Path p = bed.cgroup(CgroupBed.root(iso, Mechanism.V1));
        Path c = bed.cgroup(p);
        V1KernelModel.Cg root = new V1KernelModel.Cg(null);
        V1KernelModel.Cg mp = new V1KernelModel.Cg(root);
        V1KernelModel.Cg mc = new V1KernelModel.Cg(mp);
        Random rnd = new Random(Long.getLong("gpusched.model.seed", 4242));
        int refused = 0;
        for (int i = 1; i <= 400; i++) {
            boolean toParent = rnd.nextInt(3) == 0;
            boolean allowFile = rnd.nextBoolean();
            String line = randomLine(rnd);
            int k = kernelWrite(toParent ? p : c, allowFile, line);
            int m = V1KernelModel.write(toParent ? mp : mc, allowFile, line);
            String what = "write " + i + ": '" + line + "' to " + (toParent ? "parent" : "child") + " devices."
                    + (allowFile ? "allow" : "deny");
            assertThat(k).as(what).isEqualTo(m);
            refused += k == V1KernelModel.OK ? 0 : 1;
            assertThat(new TreeSet<>(CgroupBed.list(p))).as(what + ": parent list")
                    .isEqualTo(new TreeSet<>(mp.list()));
            assertThat(new TreeSet<>(CgroupBed.list(c))).as(what + ": child list").isEqualTo(new TreeSet<>(mc.list()));
            if (i % Integer.getInteger("gpusched.model.probeEvery", 50) == 0) {
                Map<String, String> seen = bed.probe(c);
                Map<String, String> model = new LinkedHashMap<>();
                int[][] devs = {{195, 0}, {195, 1}, {226, 0}, {226, 1}};
                for (int d = 0; d < devs.length; d++) {
                    String acc = (mc.admits('c', devs[d][0], devs[d][1], V1Fence.R) ? "r" : "")
                            + (mc.admits('c', devs[d][0], devs[d][1], V1Fence.W) ? "w" : "");
                    model.put(bed.nodes.get(d), acc.isEmpty() ? CgroupBed.NONE : acc);
                }
                assertThat(seen)
                        .as(what + ": opens from the child; model child " + (mc.allow ? "allow " : "deny ")
                                + mc.ex.stream().map(V1KernelModel.Ex::line).toList() + " parent "
                                + (mp.allow ? "allow " : "deny ") + mp.ex.stream().map(V1KernelModel.Ex::line).toList())
                        .isEqualTo(model);
            }
        }
        assertThat(refused).as("the sequence exercised refusals too").isPositive();
    }

    static Map<V1Fence.Key, Integer> randomMap(Random rnd, boolean wildcards) {
        Map<V1Fence.Key, Integer> m = new LinkedHashMap<>();
        int n = rnd.nextInt(6);
        for (int i = 0; i < n; i++) {
            int major = wildcards && rnd.nextInt(6) == 0 ? V1KernelModel.ANY : rnd.nextBoolean() ? 195 : 226;
            int minor = wildcards && rnd.nextInt(4) == 0 ? V1KernelModel.ANY : rnd.nextInt(4);
            m.merge(new V1Fence.Key('c', major, minor), 1 + rnd.nextInt(7), (a, b) -> a | b);
        }
        return m;
    }

    /** @return every (major, minor, bit) the cgroup admits over a small universe */
    static Set<String> admitted(V1KernelModel.Cg cg) {
        Set<String> out = new TreeSet<>();
        for (int major : new int[]{195, 226, 1}) {
            for (int minor = 0; minor < 5; minor++) {
                for (int bit : BITS) {
                    if (cg.admits('c', major, minor, bit)) {
                        out.add(major + ":" + minor + "/" + bit);
                    }
                }
            }
        }
        return out;
    }

    static void apply(V1KernelModel.Cg cg, String file, String line) {
        assertThat(V1KernelModel.write(cg, file.equals("devices.allow"), line)).as(file + " " + line).isZero();
    }

    @Test
    void issue12_everyPrefixOfAWritePlanAndOfItsUndoStaysWithinOldUnionNew() {
        Random rnd = new Random(7);
        int plans = 0;
        int prefixes = 0;
        for (int round = 0; round < 3000; round++) {
            boolean allowMode = rnd.nextBoolean();
            Map<V1Fence.Key, Integer> host = allowMode ? randomMap(rnd, true) : Map.of();
            Map<V1Fence.Key, Integer> from = randomMap(rnd, !allowMode);
            Map<V1Fence.Key, Integer> to = randomMap(rnd, !allowMode);
            if (allowMode) {
                from = V1Fence.diff(from, host);
                to = V1Fence.diff(to, host);
            }
            V1KernelModel.Cg root = new V1KernelModel.Cg(null);
            V1KernelModel.Cg cg = new V1KernelModel.Cg(root);
            cg.allow = allowMode;
            for (Map.Entry<V1Fence.Key, Integer> e : merged(host, from).entrySet()) {
                cg.ex.add(new V1KernelModel.Ex('c', e.getKey().major(), e.getKey().minor(), e.getValue()));
            }
            Set<String> before = admitted(cg);
            V1KernelModel.Cg target = new V1KernelModel.Cg(root);
            target.allow = allowMode;
            for (Map.Entry<V1Fence.Key, Integer> e : merged(host, to).entrySet()) {
                target.ex.add(new V1KernelModel.Ex('c', e.getKey().major(), e.getKey().minor(), e.getValue()));
            }
            Set<String> union = new TreeSet<>(before);
            union.addAll(admitted(target));
            List<V1Fence.Step> steps = V1Fence.steps(from, to, allowMode);
            int cut = rnd.nextInt(steps.size() + 1);
            List<V1Fence.Step> done = new ArrayList<>();
            for (V1Fence.Step s : steps.subList(0, cut)) {
                apply(cg, s.file(), s.line());
                done.add(s);
                assertThat(union).as("after %s (from %s to %s)", s, from, to).containsAll(admitted(cg));
                prefixes++;
            }
            if (cut == steps.size()) {
                assertThat(V1KernelModel.map(cg)).isEqualTo(merged(host, to));
                assertThat(admitted(cg)).isEqualTo(admitted(target));
            } else {
                for (int i = done.size() - 1; i >= 0; i--) {
                    apply(cg, done.get(i).undoFile(), done.get(i).undoLine());
                    assertThat(union).containsAll(admitted(cg));
                }
                assertThat(V1KernelModel.map(cg)).as("undo ends at the old state").isEqualTo(merged(host, from));
            }
            plans++;
        }
        assertThat(plans).isEqualTo(3000);
        assertThat(prefixes).isPositive();
    }

    static Map<V1Fence.Key, Integer> merged(Map<V1Fence.Key, Integer> a, Map<V1Fence.Key, Integer> b) {
        Map<V1Fence.Key, Integer> out = new LinkedHashMap<>(a);
        b.forEach((k, v) -> out.merge(k, v, (x, y) -> x | y));
        return out;
    }
}
