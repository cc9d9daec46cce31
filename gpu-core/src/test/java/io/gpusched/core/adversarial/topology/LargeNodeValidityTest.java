package io.gpusched.core.adversarial.topology;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuHealthListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.PcieLevel;
import io.gpusched.core.strategy.TopologyAwareStrategy;
import io.gpusched.core.strategy.TopologyAwareStrategy.Objective;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Through a real scheduler (not a hand-made view) on irregular 512- and 1,024-device nodes, at the default budget and
 * at the smallest: a quarter of the GPUs held by live allocations, some unhealthy (health events), requests with and
 * without required devices, allocations kept and released as the run goes. Every answer is a valid set: the count
 * asked, no duplicate, no GPU a live allocation holds (checked against the test's own book of what it holds), no
 * unhealthy GPU, every required device; and every answer carries a certificate.
 */
@Tag("adversarial")
class LargeNodeValidityTest {

    /** n devices, 1-4 NVLinks on a third of the pairs, random PCIe levels, health the test changes. */
    static final class IrregularInventory implements GpuInventory {
        final List<GpuDevice> devices;
        final GpuHealth[] health;
        final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
        final GpuTopology topology;

        IrregularInventory(int n, long seed) {
            Random r = new Random(seed);
            List<GpuDevice> ds = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                ds.add(SubsetOracle.device(i));
            }
            devices = List.copyOf(ds);
            health = new GpuHealth[n];
            Arrays.fill(health, GpuHealth.HEALTHY);
            PcieLevel[] levels = PcieLevel.values();
            GpuTopology.Builder b = GpuTopology.builder(devices);
            for (int i = 0; i < n; i++) {
                for (int j = i + 1; j < n; j++) {
                    b.links(i, j, r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0).pcie(i, j, levels[r.nextInt(6)]);
                }
            }
            topology = b.build();
        }

        void change(int index, GpuHealth h) {
            synchronized (health) {
                health[index] = h;
            }
            for (GpuHealthListener l : listeners) {
                l.onHealthChange(devices.get(index), h);
            }
        }

        @Override
        public String backend() {
            return "review23c-irregular";
        }

        @Override
        public List<GpuDevice> devices() {
            return devices;
        }

        @Override
        public GpuTopology topology() {
            return topology;
        }

        @Override
        public GpuSample sample() {
            Instant now = Instant.now();
            return new GpuSample(now, devices.stream().map(d -> GpuMetrics.unavailable(d.index(), now)).toList());
        }

        @Override
        public GpuHealth health(GpuDevice device) {
            synchronized (health) {
                return health[device.index()];
            }
        }

        @Override
        public void addHealthListener(GpuHealthListener listener) {
            listeners.add(listener);
        }

        @Override
        public void removeHealthListener(GpuHealthListener listener) {
            listeners.remove(listener);
        }

        @Override
        public void close() {
        }
    }

    static int freeNow(int n, Set<Integer> busy, Set<Integer> unhealthy) {
        int f = 0;
        for (int i = 0; i < n; i++) {
            f += busy.contains(i) || unhealthy.contains(i) ? 0 : 1;
        }
        return f;
    }

    @ParameterizedTest
    @CsvSource({"512,SET,2000000", "512,REMAINING,2000000", "1024,SET,2000000", "1024,REMAINING,2000000",
        "1024,SET,1000", "1024,REMAINING,1000"})
    void everyAnswerIsAValidSetOnLargeIrregularNodes(int n, Objective o, long budget) {
        IrregularInventory inv = new IrregularInventory(n, 2328 + n);
        Random r = new Random(n * 31L + o.ordinal() + budget);
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).strategy(new TopologyAwareStrategy(o, budget))
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            List<Allocation> mine = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (r.nextInt(4) == 0) {
                    mine.add(s.allocate(GpuRequest.builder().deviceIndices(List.of(i)).owner("held").build()));
                }
            }
            Set<Integer> unhealthy = new HashSet<>();
            for (int i = 0; i < n / 20; i++) {
                int d = r.nextInt(n);
                inv.change(d, GpuHealth.unhealthy("XID 79 (attack)"));
                unhealthy.add(d);
            }
            int granted = 0;
            for (int call = 0; call < 14; call++) {
                Set<Integer> busy = new HashSet<>();
                mine.forEach(a -> busy.addAll(a.deviceIndices()));
                while (freeNow(n, busy, unhealthy) < n / 3) { // keep room: a refusal for lack of GPUs tests nothing
                    Allocation gone = mine.remove(r.nextInt(mine.size()));
                    assertThat(s.release(gone.id())).isTrue();
                    busy.removeAll(gone.deviceIndices());
                }
                int[] ks = {1, 2, 3, n / 16, n / 8, n / 4};
                int k = ks[r.nextInt(ks.length)];
                List<Integer> required = new ArrayList<>();
                if (call % 2 == 1) {
                    while (required.size() < Math.min(k, 1 + r.nextInt(3))) {
                        int d = r.nextInt(n);
                        if (!busy.contains(d) && !unhealthy.contains(d) && !required.contains(d)) {
                            required.add(d);
                        }
                    }
                }
                GpuRequest.Builder rb = GpuRequest.builder().count(k).owner("job" + call);
                if (!required.isEmpty()) {
                    rb.requiredDevices(required);
                }
                Allocation a;
                try {
                    a = s.allocate(rb.build());
                } catch (GpuAllocationException e) {
                    throw new AssertionError("n=" + n + " " + o + " budget " + budget + " k=" + k + " required "
                            + required + " with " + (n - busy.size() - unhealthy.size()) + "+ free: " + e, e);
                }
                granted++;
                List<Integer> got = a.deviceIndices();
                String where = "n=" + n + " " + o + " budget " + budget + " k=" + k + " required " + required
                        + ": " + got;
                assertThat(got).as(where).hasSize(k).doesNotHaveDuplicates().containsAll(required);
                assertThat(got).as("held: " + where).noneMatch(busy::contains);
                assertThat(got).as("unhealthy: " + where).noneMatch(unhealthy::contains);
                assertThat(a.placement().rated()).as("a certificate: " + where).isTrue();
                mine.add(a);
                if (r.nextInt(3) == 0) {
                    Allocation gone = mine.remove(r.nextInt(mine.size()));
                    assertThat(s.release(gone.id())).isTrue();
                }
            }
            assertThat(granted).isEqualTo(14);
            List<Integer> live = new ArrayList<>();
            s.allocations().forEach(x -> live.addAll(x.deviceIndices()));
            assertThat(live).as("the scheduler's own view").doesNotHaveDuplicates();
            Set<Integer> expected = new HashSet<>();
            mine.forEach(x -> expected.addAll(x.deviceIndices()));
            assertThat(new HashSet<>(live)).isEqualTo(expected);
        }
    }
}
