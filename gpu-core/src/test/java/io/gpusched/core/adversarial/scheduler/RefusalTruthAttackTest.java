package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.ComputeCapability;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.SchedulingView;
import io.gpusched.testing.ManualClock;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Refusal truth through the public API: random nodes (vendors, odd model names, unknown memory, capabilities),
 * random state reached the way a host reaches it (exclusive and shared holdings, health changes, draining and
 * quarantined GPUs via real releases and maintenance), random requests. A model written here, from the documented
 * rules and not from the scheduler's state, says whether each request is placeable and, if not, the reason of the
 * first unmet constraint. The scheduler must agree on placeability, on the reason, on the exact candidate set handed
 * to the strategy, and a refusal must change nothing observable.
 */
@Tag("adversarial")
class RefusalTruthAttackTest {

    private static final String[] NAMES = {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X",
        "A100(80GB)", "[x] weird.name", "Tesla V100-PCIE-16GB", "a100(80gb)", "A1000"};
    private static final String[] PATTERNS =
            {"*a100*", "*A100(80GB)*", "[x]*", "*.*", "A100(80GB)", "nvidia h100?80gb*",
                "?", "*MI300*", "tesla*", "a100?80gb?", "A1000", "*", "*(*", "[x] weird?name"};

    /** The test's own model of one device. */
    static final class M {
        GpuDevice dev;
        boolean healthy = true;
        boolean draining;
        boolean quarantined;
        boolean exclusive;
        int shared;
        long reserved;
    }

    /** Takes the required devices, then candidates in order; records the candidates it was shown. */
    static final class TakeFirst implements AllocationStrategy {
        List<Integer> lastCandidates;

        @Override
        public String name() {
            return "take-first";
        }

        @Override
        public List<Integer> select(GpuRequest r, SchedulingView v) {
            lastCandidates = v.candidates().stream().map(DeviceState::index).toList();
            LinkedHashSet<Integer> out = new LinkedHashSet<>(r.isExplicit() ? lastCandidates : r.requiredDevices());
            for (DeviceState d : v.candidates()) {
                if (out.size() >= r.count()) {
                    break;
                }
                out.add(d.index());
            }
            return List.copyOf(out);
        }
    }

    // ------------------------------------------------------------------ the model's rules

    static boolean glob(String p, String s) {
        return glob(p, 0, s, 0);
    }

    private static boolean glob(String p, int i, String s, int j) {
        if (i == p.length()) {
            return j == s.length();
        }
        char c = p.charAt(i);
        if (c == '*') {
            for (int k = j; k <= s.length(); k++) {
                if (glob(p, i + 1, s, k)) {
                    return true;
                }
            }
            return false;
        }
        if (j == s.length()) {
            return false;
        }
        char d = s.charAt(j);
        boolean same = c == '?' || Character.toLowerCase(c) == Character.toLowerCase(d)
                || Character.toUpperCase(c) == Character.toUpperCase(d);
        return same && glob(p, i + 1, s, j + 1);
    }

    static boolean identity(GpuRequest r, GpuDevice d) {
        return r.vendor().map(v -> v == d.vendor()).orElse(true)
                && r.modelPattern().map(p -> glob(p, d.name())).orElse(true)
                && r.minComputeCapability().map(min -> d.computeCapability().map(cc -> cc.major() > min.major()
                        || cc.major() == min.major() && cc.minor() >= min.minor()).orElse(false)).orElse(true);
    }

    static boolean memory(GpuRequest r, GpuDevice d) {
        long need = Math.max(r.minMemory().map(MemorySize::bytes).orElse(0L),
                r.sharedMemory().map(MemorySize::bytes).orElse(0L));
        boolean constrained = r.minMemory().isPresent() || r.sharedMemory().isPresent();
        if (!d.memoryKnown()) {
            return !constrained;
        }
        return d.memory().bytes() >= need;
    }

    static boolean available(GpuRequest r, M m) {
        if (r.sharedMemory().isEmpty()) {
            return !m.exclusive && m.shared == 0;
        }
        return !m.exclusive && m.dev.memory().bytes() - m.reserved >= r.sharedMemory().get().bytes();
    }

    /** The first unmet constraint of one named device, or null. */
    static Reason one(GpuRequest r, M m) {
        if (!identity(r, m.dev)) {
            return Reason.NO_MATCHING_DEVICE;
        }
        if (!memory(r, m.dev)) {
            return Reason.INSUFFICIENT_MEMORY;
        }
        if (!m.healthy || m.quarantined) {
            return Reason.DEVICE_UNHEALTHY;
        }
        if (m.draining || !available(r, m)) {
            return Reason.DEVICE_BUSY;
        }
        return null;
    }

    record Expect(Reason reason, List<Integer> candidates) {
    }

    static Expect expect(GpuRequest r, List<M> node) {
        if (r.isExplicit()) {
            List<M> named = new ArrayList<>();
            for (int i : r.deviceIndices()) {
                M m = node.stream().filter(x -> x.dev.index() == i).findFirst().orElse(null);
                if (m == null) {
                    return new Expect(Reason.UNKNOWN_DEVICE, null);
                }
                named.add(m);
            }
            for (M m : named) {
                Reason why = one(r, m);
                if (why != null) {
                    return new Expect(why, null);
                }
            }
            return new Expect(null, r.deviceIndices());
        }
        int n = r.count();
        if (n > node.size()) {
            return new Expect(Reason.NODE_TOO_SMALL, null);
        }
        for (int i : r.requiredDevices()) {
            M m = node.stream().filter(x -> x.dev.index() == i).findFirst().orElse(null);
            if (m == null) {
                return new Expect(Reason.UNKNOWN_DEVICE, null);
            }
            Reason why = one(r, m);
            if (why != null) {
                return new Expect(why, null);
            }
        }
        List<M> matching = node.stream().filter(m -> identity(r, m.dev)).toList();
        if (matching.size() < n) {
            return new Expect(Reason.NO_MATCHING_DEVICE, null);
        }
        List<M> roomy = matching.stream().filter(m -> memory(r, m.dev)).toList();
        if (roomy.size() < n) {
            return new Expect(Reason.INSUFFICIENT_MEMORY, null);
        }
        List<M> usable = roomy.stream().filter(m -> m.healthy && !m.quarantined).toList();
        if (usable.size() < n) {
            return new Expect(Reason.DEVICE_UNHEALTHY, null);
        }
        List<M> free = usable.stream().filter(m -> !m.draining && available(r, m)).toList();
        if (free.size() < n) {
            return new Expect(Reason.INSUFFICIENT_GPUS, null);
        }
        return new Expect(null, free.stream().map(m -> m.dev.index()).toList());
    }

    // ------------------------------------------------------------------ random nodes and requests

    private static GpuDevice randomDevice(Random rnd, int index) {
        String name = NAMES[rnd.nextInt(NAMES.length)];
        GpuVendor vendor =
                name.startsWith("AMD") ? GpuVendor.AMD : rnd.nextInt(5) == 0 ? GpuVendor.AMD : GpuVendor.NVIDIA;
        MemorySize mem = rnd.nextInt(6) == 0 ? null : MemorySize.ofGibibytes(8L << rnd.nextInt(5));
        ComputeCapability cc = rnd.nextInt(4) == 0 ? null : new ComputeCapability(6 + rnd.nextInt(4), rnd.nextInt(3));
        return Node.device(index, name, vendor, mem, cc);
    }

    private static GpuRequest randomRequest(Random rnd, int size) {
        GpuRequest.Builder b = GpuRequest.builder();
        int kind = rnd.nextInt(8);
        boolean shared = rnd.nextInt(4) == 0;
        if (kind == 0) {
            int k = 1 + rnd.nextInt(Math.min(3, size + 1));
            Set<Integer> idx = new LinkedHashSet<>();
            while (idx.size() < k) {
                idx.add(rnd.nextInt(size + 2));
            }
            b.deviceIndices(List.copyOf(idx));
        } else {
            int count = 1 + rnd.nextInt(Math.max(1, size / 2 + (rnd.nextInt(5) == 0 ? size : 1)));
            b.count(count);
            if (kind == 1 || kind == 2) {
                Set<Integer> req = new LinkedHashSet<>();
                int k = 1 + rnd.nextInt(Math.min(count, 2));
                while (req.size() < k) {
                    req.add(rnd.nextInt(size + 1));
                }
                b.requiredDevices(List.copyOf(req));
            }
        }
        if (rnd.nextInt(3) == 0) {
            b.vendor(rnd.nextBoolean() ? GpuVendor.NVIDIA : GpuVendor.AMD);
        }
        if (rnd.nextInt(3) == 0) {
            b.modelPattern(PATTERNS[rnd.nextInt(PATTERNS.length)]);
        }
        if (rnd.nextInt(3) == 0) {
            b.minMemory(MemorySize.ofGibibytes(8L << rnd.nextInt(5)));
        }
        if (rnd.nextInt(4) == 0) {
            b.minComputeCapability(new ComputeCapability(6 + rnd.nextInt(4), rnd.nextInt(3)));
        }
        if (shared) {
            b.shared(MemorySize.ofGibibytes(1L << rnd.nextInt(7)));
        }
        return b.build();
    }

    /** What a caller can observe, minus the status timestamp. */
    private static List<Object> observable(GpuScheduler s) {
        var st = s.status();
        return List.of(s.devices(), s.allocations(), st.devices(), st.allocations());
    }

    @Test
    void everyRefusalNamesTheFirstUnmetConstraintAndEveryPlaceableRequestIsPlaced() {
        Random rnd = new Random(0x13_2026L);
        int refusals = 0;
        int grants = 0;
        Set<Reason> reasonsSeen = new HashSet<>();
        for (int trial = 0; trial < 300; trial++) {
            int size = 1 + rnd.nextInt(trial % 10 == 0 ? 64 : 10);
            List<GpuDevice> devs = new ArrayList<>();
            for (int i = 0; i < size; i++) {
                devs.add(randomDevice(rnd, i));
            }
            Node node = new Node(devs);
            Set<String> keepsProcesses = new HashSet<>();
            node.processes = d -> Optional.of(keepsProcesses.contains(d.uuid())
                    ? List.of(new GpuProcess(4242, Optional.empty())) : List.of());
            List<M> model = new ArrayList<>();
            for (GpuDevice d : devs) {
                M m = new M();
                m.dev = d;
                model.add(m);
            }
            ManualClock clock = new ManualClock();
            TakeFirst strategy = new TakeFirst();
            GpuConfig config = GpuConfig.builder().drainTimeout(Duration.ofSeconds(10)).allowSharing(true).build();
            try (GpuScheduler s = GpuScheduler.builder().inventory(node).strategy(strategy).config(config).clock(clock)
                    .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
                // quarantined: released with a process left, past the drain timeout
                for (M m : model) {
                    if (rnd.nextInt(10) == 0) {
                        keepsProcesses.add(m.dev.uuid());
                        Allocation a = s.allocate(GpuRequest.builder().deviceIndices(m.dev.index()).build());
                        s.release(a.id());
                        m.quarantined = true;
                    }
                }
                clock.advance(Duration.ofSeconds(11));
                s.maintain();
                // draining: released with a process left, within the timeout
                for (M m : model) {
                    if (!m.quarantined && rnd.nextInt(10) == 0) {
                        keepsProcesses.add(m.dev.uuid());
                        Allocation a = s.allocate(GpuRequest.builder().deviceIndices(m.dev.index()).build());
                        s.release(a.id());
                        m.draining = true;
                    }
                }
                // held: exclusively, or shared (known memory only) by one or two allocations
                for (M m : model) {
                    if (m.quarantined || m.draining) {
                        continue;
                    }
                    int h = rnd.nextInt(5);
                    if (h == 0) {
                        s.allocate(GpuRequest.builder().deviceIndices(m.dev.index()).build());
                        m.exclusive = true;
                    } else if (h == 1 && m.dev.memoryKnown()) {
                        for (int k = 0; k < 1 + rnd.nextInt(2); k++) {
                            long gib = 1L << rnd.nextInt(4);
                            if (m.dev.memory().bytes() - m.reserved >= MemorySize.ofGibibytes(gib).bytes()) {
                                s.allocate(GpuRequest.builder().deviceIndices(m.dev.index())
                                        .shared(MemorySize.ofGibibytes(gib)).build());
                                m.shared++;
                                m.reserved += MemorySize.ofGibibytes(gib).bytes();
                            }
                        }
                    }
                }
                // health: some sick (held or not, any pool), told by the backend's listener
                for (int p = 0; p < model.size(); p++) {
                    int h = rnd.nextInt(6);
                    if (h == 0) {
                        node.change(p, GpuHealth.lost("fell off the bus"));
                        model.get(p).healthy = false;
                    } else if (h == 1) {
                        node.change(p, GpuHealth.unhealthy("XID 48"));
                        model.get(p).healthy = false;
                    }
                }
                for (int q = 0; q < 25; q++) {
                    GpuRequest r = randomRequest(rnd, size);
                    Expect want = expect(r, model);
                    List<Object> before = observable(s);
                    strategy.lastCandidates = null;
                    try {
                        Allocation a = s.allocate(r);
                        if (want.reason() != null) {
                            fail("trial %d: %s was granted %s; the model refuses it with %s (node %s)", trial,
                                    r.describe(), a.deviceIndices(), want.reason(), describe(model));
                        }
                        grants++;
                        assertThat(strategy.lastCandidates).as("trial %d: candidates for %s", trial, r.describe())
                                .isEqualTo(want.candidates());
                        assertThat(want.candidates()).containsAll(a.deviceIndices());
                        assertThat(a.deviceIndices()).containsAll(r.requiredDevices()).doesNotHaveDuplicates()
                                .hasSize(r.count());
                        s.release(a.id());
                        s.maintain(); // released GPUs with no process left return to the pool
                        assertThat(observable(s)).as("trial %d: after allocate+release of %s", trial, r.describe())
                                .isEqualTo(before);
                    } catch (GpuAllocationException e) {
                        if (want.reason() == null) {
                            fail("trial %d: %s was refused (%s: %s); the model places it on %s (node %s)", trial,
                                    r.describe(), e.reason(), e.getMessage(), want.candidates(), describe(model));
                        }
                        assertThat(e.reason()).as("trial %d: %s refused with \"%s\" (node %s)", trial, r.describe(),
                                e.getMessage(), describe(model)).isEqualTo(want.reason());
                        assertThat(observable(s)).as("a refusal changes nothing").isEqualTo(before);
                        refusals++;
                        reasonsSeen.add(e.reason());
                    }
                }
            }
        }
        assertThat(grants).isGreaterThan(500);
        assertThat(refusals).isGreaterThan(500);
        assertThat(reasonsSeen).contains(Reason.NODE_TOO_SMALL, Reason.UNKNOWN_DEVICE, Reason.NO_MATCHING_DEVICE,
                Reason.INSUFFICIENT_MEMORY, Reason.DEVICE_UNHEALTHY, Reason.DEVICE_BUSY, Reason.INSUFFICIENT_GPUS);
    }

    private static String describe(List<M> model) {
        StringBuilder sb = new StringBuilder();
        for (M m : model) {
            sb.append("\n  ").append(m.dev).append(' ').append(m.dev.vendor()).append(" cc ")
                    .append(m.dev.computeCapability().map(Object::toString).orElse("-"))
                    .append(m.healthy ? "" : " SICK").append(m.quarantined ? " QUARANTINED" : "")
                    .append(m.draining ? " DRAINING" : "").append(m.exclusive ? " HELD" : "")
                    .append(m.shared > 0 ? " shared x" + m.shared + " " + m.reserved + " B" : "");
        }
        return sb.toString();
    }
}
