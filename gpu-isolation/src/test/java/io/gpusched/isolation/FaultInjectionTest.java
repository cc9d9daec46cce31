package io.gpusched.isolation;

import static io.gpusched.isolation.CgroupBed.nv;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every write of a v1 fence made to fail in turn (fence, update, revoke), on each kind of host cgroup: after each
 * failure the previous state must be exactly in force, checked by reading {@code devices.list} ourselves and by
 * opening the nodes from inside the cgroup. Also for v2: a program the verifier rejects, on fence and on update.
 */
@Tag("cgroup")
class FaultInjectionTest {
    @TempDir
    Path dir;
    CgroupBed bed;

    @AfterEach
    void tearDown() throws Exception {
        if (bed != null) {
            bed.close();
        }
    }

    enum Host {
        DEFAULT_ALLOW(null), CONTAINER("c 195:255 rw"), CONTAINER_WILDCARD("c 195:* rwm");

        final String rule;

        Host(String rule) {
            this.rule = rule;
        }
    }

    Path cgroup(CgroupDeviceIsolator iso, Host h) throws Exception {
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V1));
        if (h.rule != null) {
            CgroupBed.write(cg, "devices.deny", "a");
            CgroupBed.write(cg, "devices.allow", "c 1:3 rwm");
            CgroupBed.write(cg, "devices.allow", h.rule);
        }
        return cg;
    }

    /** Fails the n-th write (1-based) from now; counts every write. */
    static final class Faults implements V1Fence.Writer {
        final AtomicInteger writes = new AtomicInteger();
        volatile int failAt;
        volatile boolean failAfter;

        @Override
        public void write(Path file, String line) throws IOException {
            int n = writes.incrementAndGet();
            if (n == failAt || (failAfter && n > failAt && failAt > 0)) {
                throw new IOException("Input/output error (injected at write " + n + ")");
            }
            V1Fence.KERNEL.write(file, line);
        }

        int count(Runnable r) {
            failAt = 0;
            writes.set(0);
            r.run();
            return writes.get();
        }

        void failNext(int k) {
            writes.set(0);
            failAt = k;
        }
    }

    /** Whether to open the nodes after write k too (deny-list hosts are also checked by their list every time). */
    static boolean probeAt(int k, int n, Host h) {
        return h == Host.DEFAULT_ALLOW || k % 32 == 1 || k == n;
    }

    @ParameterizedTest
    @EnumSource(Host.class)
    void issue12_everyWriteOfAV1FenceFailingInTurnLeavesThePreviousStateInForce(Host h) throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V1);
        Path cg = cgroup(iso, h);
        Faults faults = new Faults();
        V1Fence.writer = faults;
        List<String> hostList = CgroupBed.list(cg);
        Map<String, String> hostSeen = bed.probe(cg);
        Allocation gpu1 = bed.gpus(1);
        Allocation gpu23 = bed.gpus(2, 3);

        int fenceWrites = faults.count(() -> iso.fence(cg, gpu1).revoke());
        assertThat(fenceWrites).isPositive();
        int fenceOnly = faults.count(() -> iso.fence(cg, gpu1));
        iso.fence(cg, gpu1).revoke();
        for (int k = 1; k <= fenceOnly; k++) {
            faults.failNext(k);
            assertThatThrownBy(() -> iso.fence(cg, gpu1)).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("injected at write").hasMessageContaining("previous rules are in force");
            assertThat(CgroupBed.list(cg)).as("after a failed write %d of %d while fencing", k, fenceOnly)
                    .isEqualTo(hostList);
            if (probeAt(k, fenceOnly, h)) {
                assertThat(bed.probe(cg)).as("write %d of the fence failed", k).isEqualTo(hostSeen);
            }
        }

        faults.failNext(0);
        Fence f = bed.track(iso.fence(cg, gpu1));
        List<String> fenced = CgroupBed.list(cg);
        Map<String, String> fencedSeen = bed.probe(cg);
        assertThat(fencedSeen).isEqualTo(bed.only(nv(1)));
        int updateWrites = faults.count(() -> f.update(gpu23));
        f.update(gpu1);
        for (int k = 1; k <= updateWrites; k++) {
            faults.failNext(k);
            assertThatThrownBy(() -> f.update(gpu23)).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("previous rules are in force");
            assertThat(f.allocation()).isEqualTo(gpu1);
            assertThat(CgroupBed.list(cg)).as("after a failed write %d of an update", k).isEqualTo(fenced);
            assertThat(bed.probe(cg)).as("write %d of the update failed", k).isEqualTo(fencedSeen);
        }

        faults.failNext(0);
        int revokeWrites = faults.count(f::revoke);
        Fence again = bed.track(iso.fence(cg, gpu1));
        for (int k = 1; k <= revokeWrites; k++) {
            faults.failNext(k);
            assertThatThrownBy(again::revoke).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("revoking the fence");
            assertThat(again.isActive()).as("a revoke that failed says so and keeps the fence").isTrue();
            assertThat(CgroupBed.list(cg)).isEqualTo(fenced);
            if (probeAt(k, revokeWrites, h)) {
                assertThat(bed.probe(cg)).as("write %d of the revoke failed", k).isEqualTo(fencedSeen);
            }
        }
        faults.failNext(0);
        again.revoke();
        assertThat(again.isActive()).isFalse();
        assertThat(CgroupBed.list(cg)).isEqualTo(hostList);
        assertThat(bed.probe(cg)).isEqualTo(hostSeen);
        System.out.println("FAULTS " + h + ": fence " + fenceOnly + " writes, update " + updateWrites + ", revoke "
                + revokeWrites + ": each failed in turn, previous state in force every time");
    }

    /** How a write the kernel accepts may still not land as written. */
    enum Corruption {
        /** the write returns but nothing changes */
        SWALLOW,
        /** only part of the access letters take ({@code c 195:1 rw} lands as {@code c 195:1 r}) */
        PARTIAL,
        /** the write lands, then a host rule the plan does not model appears next to it */
        FOREIGN
    }

    /**
     * Accepts every write (no error), but makes write k land differently ({@link Corruption}); counts every write.
     * The foreign rule: default-deny hosts get an allow of GPU 0 (a leak), default-allow hosts a deny of nvidiactl
     * writes.
     */
    static final class Corrupt implements V1Fence.Writer {
        final AtomicInteger writes = new AtomicInteger();
        final boolean defaultAllow;
        volatile int at;
        volatile Corruption how = Corruption.SWALLOW;

        Corrupt(boolean defaultAllow) {
            this.defaultAllow = defaultAllow;
        }

        @Override
        public void write(Path file, String line) throws IOException {
            if (writes.incrementAndGet() != at) {
                V1Fence.KERNEL.write(file, line);
                return;
            }
            String access = line.substring(line.lastIndexOf(' ') + 1);
            switch (how) {
                case SWALLOW -> {
                }
                case PARTIAL -> {
                    if (access.length() > 1) {
                        V1Fence.KERNEL.write(file, line.substring(0, line.length() - 1));
                    }
                }
                case FOREIGN -> {
                    V1Fence.KERNEL.write(file, line);
                    V1Fence.KERNEL.write(file.resolveSibling(defaultAllow ? "devices.deny" : "devices.allow"),
                            foreign());
                }
            }
        }

        String foreign() {
            return defaultAllow ? "c 195:255 w" : "c 195:0 rw";
        }

        /** Takes the foreign rule away again, by hand. */
        void repair(Path cg) throws IOException {
            if (how == Corruption.FOREIGN) {
                CgroupBed.write(cg, defaultAllow ? "devices.allow" : "devices.deny", foreign());
            }
        }

        int count(Runnable r) {
            at = 0;
            writes.set(0);
            r.run();
            return writes.get();
        }

        void corrupt(int k) {
            writes.set(0);
            at = k;
        }
    }

    /** @return the writes to corrupt: all of a short plan, a spread of a long one (a wildcard's 256 minors) */
    static List<Integer> sample(int n) {
        if (n <= 12) {
            return java.util.stream.IntStream.rangeClosed(1, n).boxed().toList();
        }
        return java.util.stream.IntStream.of(1, 2, 3, n / 3, n / 2, 2 * n / 3, n - 2, n - 1, n).distinct().boxed()
                .toList();
    }

    /**
     * Issue 25 item 3: each write of a fence, an update and a revoke is in turn accepted by the kernel but lands
     * otherwise (swallowed, partial, or joined by a host rule the plan does not model). Only the read-back can see it:
     * every such call must fail naming the read-back; a swallowed or partial write is undone and the previous state
     * is in force (checked by reading devices.list and opening the nodes ourselves); with a foreign rule the message
     * says the rules are unknown, and once the test takes the foreign rule away the previous state is there.
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.MethodSource("hostsAndCorruptions")
    void issue25_aWriteTheKernelAcceptsButDoesNotApplyIsCaughtByTheReadBack(Host h, Corruption how) throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V1);
        Path cg = cgroup(iso, h);
        Corrupt c = new Corrupt(h == Host.DEFAULT_ALLOW);
        c.how = how;
        V1Fence.writer = c;
        List<String> hostList = CgroupBed.list(cg);
        Map<String, String> hostSeen = bed.probe(cg);
        Allocation gpu1 = bed.gpus(1);
        Allocation gpu23 = bed.gpus(2, 3);
        String caught = how == Corruption.FOREIGN ? "unknown" : "previous rules are in force";

        int fenceWrites = c.count(() -> iso.fence(cg, gpu1));
        List<String> fenced = CgroupBed.list(cg);
        Map<String, String> fencedSeen = bed.probe(cg);
        assertThat(fencedSeen).isEqualTo(bed.only(nv(1)));
        iso.fence(cg, gpu1).revoke();
        int tried = 0;
        for (int k : sample(fenceWrites)) {
            c.corrupt(k);
            assertThatThrownBy(() -> iso.fence(cg, gpu1)).as("%s at write %d of %d of a fence", how, k, fenceWrites)
                    .isInstanceOf(IsolationException.class).hasMessageContaining("read-back")
                    .hasMessageContaining(caught);
            c.repair(cg);
            assertThat(CgroupBed.list(cg)).as("after %s at write %d of a fence", how, k).isEqualTo(hostList);
            assertThat(bed.probe(cg)).isEqualTo(hostSeen);
            tried++;
        }

        c.corrupt(0);
        Fence f = bed.track(iso.fence(cg, gpu1));
        int updateWrites = c.count(() -> f.update(gpu23));
        f.update(gpu1);
        for (int k : sample(updateWrites)) {
            c.corrupt(k);
            assertThatThrownBy(() -> f.update(gpu23)).as("%s at write %d of %d of an update", how, k, updateWrites)
                    .isInstanceOf(IsolationException.class).hasMessageContaining("read-back")
                    .hasMessageContaining(caught);
            c.repair(cg);
            assertThat(f.allocation()).isEqualTo(gpu1);
            assertThat(CgroupBed.list(cg)).isEqualTo(fenced);
            assertThat(bed.probe(cg)).isEqualTo(fencedSeen);
            tried++;
        }

        c.corrupt(0);
        int revokeWrites = c.count(f::revoke);
        Fence again = bed.track(iso.fence(cg, gpu1));
        for (int k : sample(revokeWrites)) {
            c.corrupt(k);
            assertThatThrownBy(again::revoke).as("%s at write %d of %d of a revoke", how, k, revokeWrites)
                    .isInstanceOf(IsolationException.class).hasMessageContaining("read-back")
                    .hasMessageContaining(caught);
            c.repair(cg);
            assertThat(again.isActive()).isTrue();
            assertThat(CgroupBed.list(cg)).isEqualTo(fenced);
            assertThat(bed.probe(cg)).isEqualTo(fencedSeen);
            tried++;
        }
        c.corrupt(0);
        again.revoke();
        assertThat(CgroupBed.list(cg)).isEqualTo(hostList);
        assertThat(bed.probe(cg)).isEqualTo(hostSeen);
        System.out.println("READBACK " + h + " " + how + ": " + tried + " corrupted writes (fence " + fenceWrites
                + ", update " + updateWrites + ", revoke " + revokeWrites + " writes), each caught");
    }

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> hostsAndCorruptions() {
        return java.util.Arrays.stream(Host.values()).flatMap(h -> java.util.Arrays.stream(Corruption.values())
                .map(c -> org.junit.jupiter.params.provider.Arguments.of(h, c)));
    }

    @Test
    void aFailedUndoIsReportedAsUnknownNotAsSuccess() throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V1);
        Path cg = cgroup(iso, Host.CONTAINER);
        Fence f = bed.track(iso.fence(cg, bed.gpus(1)));
        Faults faults = new Faults();
        V1Fence.writer = faults;
        faults.failAfter = true;
        faults.failNext(2);
        assertThatThrownBy(() -> f.update(bed.gpus(2, 3))).isInstanceOf(IsolationException.class)
                .hasMessageContaining("undoing it failed too").hasMessageContaining("unknown");
    }

    /** Fails the n-th bpf(2) step (load, attach, detach) from now; counts every step. */
    static final class BpfFaults implements java.util.function.Predicate<String> {
        final AtomicInteger steps = new AtomicInteger();
        volatile int failAt;

        @Override
        public boolean test(String step) {
            return steps.incrementAndGet() == failAt;
        }

        int count(Runnable r) {
            failAt = 0;
            steps.set(0);
            r.run();
            return steps.get();
        }

        void failNext(int k) {
            steps.set(0);
            failAt = k;
        }
    }

    @ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void issue12_everyBpfStepOfAV2FenceFailingInTurnLeavesThePreviousStateInForce(boolean replace) throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V2);
        if (!replace) {
            iso.replaceSupported(false);
        }
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V2));
        BpfFaults faults = new BpfFaults();
        V2Fence.fault = faults;
        Allocation gpu1 = bed.gpus(1);
        Allocation gpu23 = bed.gpus(2, 3);
        Map<String, String> host = bed.probe(cg);
        int fenceSteps = faults.count(() -> iso.fence(cg, gpu1).revoke()) - 1;
        for (int k = 1; k <= fenceSteps; k++) {
            faults.failNext(k);
            assertThatThrownBy(() -> iso.fence(cg, gpu1)).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("injected");
            assertThat(CgroupIsolationTest.ourPrograms(cg)).isZero();
            assertThat(bed.probe(cg)).as("bpf step %d of the fence failed", k).isEqualTo(host);
        }
        faults.failNext(0);
        Fence f = bed.track(iso.fence(cg, gpu1));
        int updateSteps = faults.count(() -> f.update(gpu23));
        f.update(gpu1);
        for (int k = 1; k <= updateSteps; k++) {
            faults.failNext(k);
            assertThatThrownBy(() -> f.update(gpu23)).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("injected");
            assertThat(f.allocation()).isEqualTo(gpu1);
            assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(1);
            assertThat(bed.probe(cg)).as("bpf step %d of the update failed", k).isEqualTo(bed.only(nv(1)));
        }
        faults.failNext(0);
        int revokeSteps = faults.count(f::revoke);
        Fence again = bed.track(iso.fence(cg, gpu1));
        for (int k = 1; k <= revokeSteps; k++) {
            faults.failNext(k);
            assertThatThrownBy(again::revoke).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("stays in force");
            assertThat(again.isActive()).isTrue();
            assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(1)));
        }
        faults.failNext(0);
        again.revoke();
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isZero();
        assertThat(bed.probe(cg)).isEqualTo(host);
        System.out.println("BPF-FAULTS replace=" + replace + ": fence " + fenceSteps + " steps, update " + updateSteps
                + ", revoke " + revokeSteps + ": each failed in turn, previous state in force every time");
    }

    @Test
    void aV2ProgramTheVerifierRejectsLeavesThePreviousProgram() throws Exception {
        bed = new CgroupBed(dir, false);
        CgroupDeviceIsolator iso = bed.isolator(Mechanism.V2);
        Path cg = bed.cgroup(CgroupBed.root(iso, Mechanism.V2));
        V2Fence.programFilter = BpfDeviceProgram::corrupted;
        assertThatThrownBy(() -> iso.fence(cg, bed.gpus(1))).hasMessageContaining("rejected");
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(0, 1, 2, 3)));
        V2Fence.programFilter = java.util.function.UnaryOperator.identity();
        Fence f = bed.track(iso.fence(cg, bed.gpus(1)));
        V2Fence.programFilter = BpfDeviceProgram::corrupted;
        assertThatThrownBy(() -> f.update(bed.gpus(2))).hasMessageContaining("rejected");
        assertThat(bed.probe(cg)).isEqualTo(bed.only(nv(1)));
        assertThat(CgroupIsolationTest.ourPrograms(cg)).isEqualTo(1);
        assertThat(Files.isDirectory(cg)).isTrue();
    }
}
