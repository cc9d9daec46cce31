package io.gpusched.isolation.adversarial;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Independent checkers for the adversarial tests: fake device nodes made with mknod, cgroups made and removed by hand,
 * and a prober (a bash placed in the cgroups) that opens nodes and tells ENXIO (the device cgroup let the open through)
 * from EPERM (refused). Nothing here asks the isolator what it did.
 */
final class Adv {
    static final Path V1 = Path.of("/sys/fs/cgroup/devices");
    static final Path V2 = Path.of("/sys/fs/cgroup/unified");
    static final int KFD_MAJOR = 239;

    private Adv() {
    }

    static boolean isRoot() {
        try {
            for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (l.startsWith("Uid:")) {
                    return l.split("\\s+")[2].equals("0");
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    static void assumeV1() {
        assumeTrue(isRoot(), "needs root to write cgroup device rules");
        assumeTrue(Files.isRegularFile(V1.resolve("devices.allow")), "needs the cgroup v1 devices hierarchy at " + V1);
    }

    static void assumeV2() {
        assumeTrue(isRoot(), "needs root to attach cgroup device programs");
        assumeTrue(Files.isRegularFile(V2.resolve("cgroup.procs")) && !Files.exists(V2.resolve("devices.allow")),
                "needs cgroup2 at " + V2);
    }

    /** A fresh cgroup directory made by hand under {@code root}. */
    static Path mkCgroup(Path root) throws IOException {
        Path p = root.resolve("gpx-adv-" + UUID.randomUUID().toString().substring(0, 8));
        Files.createDirectory(p);
        return p;
    }

    /** Removes a cgroup and its children, deepest first (they must be empty of processes). */
    static void rmCgroup(Path p) {
        if (p == null || !Files.isDirectory(p)) {
            return;
        }
        try (Stream<Path> s = Files.list(p)) {
            for (Path c : s.filter(Files::isDirectory).toList()) {
                rmCgroup(c);
            }
        } catch (IOException ignored) {
            // gone
        }
        for (int i = 0; i < 50 && Files.isDirectory(p); i++) {
            try {
                Files.delete(p);
            } catch (IOException e) {
                sleep(20);
            }
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static void write(Path file, String line) throws IOException {
        Files.writeString(file, line);
    }

    /** Makes {@code cg} default-deny with these allow lines, as container runtimes do. */
    static void container(Path cg, String... allows) throws IOException {
        write(cg.resolve("devices.deny"), "a");
        for (String a : allows) {
            write(cg.resolve("devices.allow"), a);
        }
    }

    static List<String> list(Path cg) throws IOException {
        List<String> l = new ArrayList<>(Files.readAllLines(cg.resolve("devices.list")));
        l.removeIf(String::isBlank);
        l.sort(Comparator.naturalOrder());
        return l;
    }

    // ---- fake host: /dev and /proc with nodes made by mknod ----

    /** A fake host: 4 NVIDIA GPUs (minors 0..3), nvidiactl, 2 AMD GPUs (render 128/129, card 0/1), kfd. */
    static final class Host implements AutoCloseable {
        final Path dir;
        final Path dev;
        final Path proc;

        Host() throws IOException, InterruptedException {
            dir = Files.createTempDirectory("gpx-adv-host");
            dev = dir.resolve("dev");
            proc = dir.resolve("proc");
            Files.createDirectories(dev.resolve("dri"));
            Files.createDirectories(proc);
            Files.writeString(proc.resolve("devices"),
                    "Character devices:\n  1 mem\n195 nvidia-frontend\n226 drm\n" + KFD_MAJOR
                            + " kfd\n\nBlock devices:\n"
                            + "  7 loop\n");
            for (int i = 0; i < 4; i++) {
                mknod(nv(i), 195, i);
            }
            mknod(dev.resolve("nvidiactl"), 195, 255);
            mknod(dev.resolve("nvidia-modeset"), 195, 254);
            for (int i = 0; i < 2; i++) {
                mknod(render(i), 226, 128 + i);
                mknod(card(i), 226, i);
            }
            mknod(kfd(), KFD_MAJOR, 0);
            mknod(dev.resolve("other"), 195, 100);
        }

        Path nv(int i) {
            return dev.resolve("nvidia" + i);
        }

        Path render(int i) {
            return dev.resolve("dri/renderD" + (128 + i));
        }

        Path card(int i) {
            return dev.resolve("dri/card" + i);
        }

        Path kfd() {
            return dev.resolve("kfd");
        }

        List<Path> nvNodes() {
            return List.of(nv(0), nv(1), nv(2), nv(3));
        }

        CgroupDeviceIsolator.Builder nvidia() {
            return CgroupDeviceIsolator.builder().hostDevices(nvDevices()).devRoot(dev).procRoot(proc);
        }

        CgroupDeviceIsolator.Builder amd() {
            return CgroupDeviceIsolator.builder().hostDevices(amdDevices()).devRoot(dev).procRoot(proc);
        }

        @Override
        public void close() throws IOException {
            try (Stream<Path> s = Files.walk(dir)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    static void mknod(Path p, int major, int minor) throws IOException, InterruptedException {
        run("mknod", "-m", "0666", p.toString(), "c", String.valueOf(major), String.valueOf(minor));
    }

    static String run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(20, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed: " + out);
        }
        return out;
    }

    static List<GpuDevice> nvDevices() {
        List<GpuDevice> l = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            l.add(GpuDevice.builder().index(i).uuid("GPU-adv-" + i).vendor(GpuVendor.NVIDIA).name("Fake")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + (i + 1) + ":00.0").minor(i).build());
        }
        return l;
    }

    static List<GpuDevice> amdDevices() {
        List<GpuDevice> l = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            l.add(GpuDevice.builder().index(i).uuid("AMD-adv-" + i).vendor(GpuVendor.AMD).name("FakeMI")
                    .memory(MemorySize.ofGibibytes(16)).pciBusId("0000:0" + (i + 1) + ":00.0").minor(128 + i)
                    .property("drm.card_minor", String.valueOf(i)).build());
        }
        return l;
    }

    static Allocation alloc(List<GpuDevice> host, int... idx) {
        List<GpuDevice> d = new ArrayList<>();
        for (int i : idx) {
            d.add(host.get(i));
        }
        return new Allocation("adv-" + Arrays.toString(idx), d, GpuRequest.builder().count(Math.max(1, idx.length))
                .build(), Instant.now());
    }

    // ---- the prober ----

    /**
     * Opens each node from a bash placed in every cgroup of {@code cgroups} (a procs file is written in each), for
     * reading ({@code 'r'}) or writing ({@code 'w'}). @return node -> true when the device cgroup let the open through
     */
    static Map<Path, Boolean> probe(List<Path> cgroups, List<Path> nodes, char mode)
            throws IOException, InterruptedException {
        StringBuilder s = new StringBuilder();
        for (Path cg : cgroups) {
            s.append("echo $$ > '").append(cg.resolve("cgroup.procs")).append("' || exit 3\n");
        }
        String redir = mode == 'r' ? "<" : ">>";
        s.append("for n in \"$@\"; do e=$( ( exec 3").append(redir).append("\"$n\" ) 2>&1 ); echo \"R $e\"; done\n");
        List<String> cmd = new ArrayList<>(List.of("bash", "-c", s.toString(), "probe"));
        nodes.forEach(n -> cmd.add(n.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(20, TimeUnit.SECONDS) || p.exitValue() != 0) {
            fail("prober failed: " + out);
        }
        List<String> lines = out.lines().filter(l -> l.startsWith("R ")).toList();
        if (lines.size() != nodes.size()) {
            fail("prober answered " + lines.size() + " of " + nodes.size() + ": " + out);
        }
        Map<Path, Boolean> m = new LinkedHashMap<>();
        for (int i = 0; i < nodes.size(); i++) {
            String l = lines.get(i);
            if (l.contains("No such device or address")) {
                m.put(nodes.get(i), true);
            } else if (l.contains("Operation not permitted")) {
                m.put(nodes.get(i), false);
            } else {
                fail("unexpected open result for " + nodes.get(i) + ": " + l);
            }
        }
        return m;
    }

    /** @return the nodes of {@code nodes} that open (for reading and for writing: both are checked) */
    static List<Path> openable(List<Path> cgroups, List<Path> nodes) throws IOException, InterruptedException {
        Map<Path, Boolean> r = probe(cgroups, nodes, 'r');
        Map<Path, Boolean> w = probe(cgroups, nodes, 'w');
        List<Path> l = new ArrayList<>();
        for (Path n : nodes) {
            if (r.get(n) || w.get(n)) {
                l.add(n);
            }
        }
        return l;
    }

    // ---- bpf(2) by hand, for foreign programs and counting what is attached (cgroup v2) ----

    interface C extends Library {
        C INSTANCE = Native.load("c", C.class);

        long syscall(long number, Object... args);

        int open(String path, int flags);

        int close(int fd);
    }

    private static final long SYS_BPF = 321;
    private static final int O_DIRECTORY = 0200000;

    /**
     * Loads a device program named {@code name} that denies {@code major:minor} (char, all access) and allows the rest,
     * and attaches it to {@code cg} with BPF_F_ALLOW_MULTI. It stays attached after its fds are closed.
     */
    static void attachForeignDeny(Path cg, String name, int major, int minor) {
        assumeTrue("amd64".equals(System.getProperty("os.arch")) || "x86_64".equals(System.getProperty("os.arch")),
                "bpf syscall number is for x86_64");
        long[] insns = {
            insn(0x61, 2, 1, 4, 0), // r2 = ctx->major
            insn(0x61, 3, 1, 8, 0), // r3 = ctx->minor
            insn(0x55, 2, 0, 3, major), // if r2 != major goto allow
            insn(0x55, 3, 0, 2, minor), // if r3 != minor goto allow
            insn(0xb7, 0, 0, 0, 0), // r0 = 0
            insn(0x95, 0, 0, 0, 0), // exit
            insn(0xb7, 0, 0, 0, 1), // allow: r0 = 1
            insn(0x95, 0, 0, 0, 0), // exit
        };
        Memory prog = new Memory(insns.length * 8L);
        for (int i = 0; i < insns.length; i++) {
            prog.setLong(i * 8L, insns[i]);
        }
        Memory lic = new Memory(8);
        lic.setString(0, "GPL");
        Memory attr = new Memory(128);
        attr.clear();
        attr.setInt(0, 15); // BPF_PROG_TYPE_CGROUP_DEVICE
        attr.setInt(4, insns.length);
        attr.setLong(8, com.sun.jna.Pointer.nativeValue(prog));
        attr.setLong(16, com.sun.jna.Pointer.nativeValue(lic));
        byte[] nm = name.getBytes(StandardCharsets.US_ASCII);
        attr.write(48, nm, 0, Math.min(15, nm.length)); // prog_name
        int progFd = (int) C.INSTANCE.syscall(SYS_BPF, 5L, attr, 128L);
        if (progFd < 0) {
            fail("BPF_PROG_LOAD of a foreign program failed, errno " + Native.getLastError());
        }
        int cgFd = C.INSTANCE.open(cg.toString(), O_DIRECTORY);
        try {
            Memory a = new Memory(128);
            a.clear();
            a.setInt(0, cgFd);
            a.setInt(4, progFd);
            a.setInt(8, 6); // BPF_CGROUP_DEVICE
            a.setInt(12, 2); // BPF_F_ALLOW_MULTI
            if (C.INSTANCE.syscall(SYS_BPF, 8L, a, 128L) != 0) {
                fail("BPF_PROG_ATTACH of a foreign program failed, errno " + Native.getLastError());
            }
        } finally {
            C.INSTANCE.close(cgFd);
            C.INSTANCE.close(progFd);
        }
    }

    /** @return the number of device programs attached directly to {@code cg} (BPF_PROG_QUERY) */
    static int attachedPrograms(Path cg) {
        int cgFd = C.INSTANCE.open(cg.toString(), O_DIRECTORY);
        if (cgFd < 0) {
            fail("cannot open " + cg);
        }
        try {
            Memory ids = new Memory(4 * 64);
            Memory a = new Memory(128);
            a.clear();
            a.setInt(0, cgFd);
            a.setInt(4, 6); // BPF_CGROUP_DEVICE
            a.setLong(16, com.sun.jna.Pointer.nativeValue(ids));
            a.setInt(24, 64);
            if (C.INSTANCE.syscall(SYS_BPF, 16L, a, 128L) != 0) {
                fail("BPF_PROG_QUERY failed, errno " + Native.getLastError());
            }
            return a.getInt(24);
        } finally {
            C.INSTANCE.close(cgFd);
        }
    }

    private static long insn(int code, int dst, int src, int off, int imm) {
        long v = code & 0xff;
        v |= (long) ((dst & 0xf) | ((src & 0xf) << 4)) << 8;
        v |= (long) (off & 0xffff) << 16;
        v |= ((long) imm & 0xffffffffL) << 32;
        return v;
    }
}
