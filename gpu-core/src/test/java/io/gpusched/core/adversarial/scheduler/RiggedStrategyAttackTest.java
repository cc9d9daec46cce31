package io.gpusched.core.adversarial.scheduler;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.SchedulingView;
import java.time.Duration;
import java.time.Instant;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A rigged {@link AllocationStrategy} against the scheduler's pick check (rewritten without a hash map for speed):
 * whatever the strategy returns, no allocation may hold a device twice, hold a device that was not a candidate, or
 * miss a required device, and a rejected pick changes nothing. Views handed to a strategy must not change under it.
 */
@Tag("adversarial")
class RiggedStrategyAttackTest {

    /** A strategy whose answer the test supplies. */
    static final class Rigged implements AllocationStrategy {
        volatile BiFunction<GpuRequest, SchedulingView, List<Integer>> answer = (r, v) -> List.of();

        @Override
        public String name() {
            return "rigged";
        }

        @Override
        public List<Integer> select(GpuRequest request, SchedulingView view) {
            return answer.apply(request, view);
        }
    }

    private static GpuScheduler scheduler(Node node, AllocationStrategy s) {
        return GpuScheduler.builder().inventory(node).strategy(s).auditLogging(false).maintenanceInterval(Duration.ZERO)
                .build();
    }

    /** What a caller can observe of the scheduler, minus the status timestamp. */
    private static List<Object> observable(GpuScheduler s) {
        var st = s.status();
        return List.of(s.devices(), s.allocations(), st.devices(), st.allocations(), st.notes(), st.drainSupported());
    }

    /** Independent check: every allocation holds distinct devices and no device is in two allocations. */
    private static void assertNoDeviceHeldTwice(GpuScheduler s) {
        Set<String> seen = new HashSet<>();
        for (Allocation a : s.allocations()) {
            assertThat(new HashSet<>(a.deviceUuids())).as("devices of %s", a.id()).hasSize(a.deviceUuids().size());
            for (String u : a.deviceUuids()) {
                assertThat(seen.add(u)).as("%s is held by two allocations", u).isTrue();
            }
            assertThat(a.devices()).hasSize(a.request().count());
        }
    }

    /**
     * A pick list that answers differently each time an element is read (a strategy returning a buffer it reuses, or
     * one another thread rewrites): read once it says [0, 0] (a duplicate), read again it says [1, 0]. The check must
     * judge one reading; judging one reading and keeping another hands GPU 0 out twice in one allocation.
     */
    @Test
    void aPickListThatChangesWhileCheckedNeverHoldsADeviceTwice() {
        Node node = Node.uniform(4);
        Rigged rigged = new Rigged();
        try (GpuScheduler s = scheduler(node, rigged)) {
            rigged.answer = (r, v) -> new AbstractList<>() {
                final AtomicInteger reads0 = new AtomicInteger();

                @Override
                public Integer get(int i) {
                    if (i == 0) {
                        return reads0.getAndIncrement() == 0 ? 0 : 1;
                    }
                    return 0;
                }

                @Override
                public int size() {
                    return 2;
                }
            };
            List<Object> before = observable(s);
            try {
                Allocation a = s.allocate(GpuRequest.builder().count(2).build());
                assertThat(new HashSet<>(a.deviceIndices())).as("allocation %s", a.deviceIndices()).hasSize(2);
            } catch (GpuException e) {
                assertThat(e).isNotInstanceOf(GpuAllocationException.class);
                assertThat(observable(s)).isEqualTo(before);
            }
            assertNoDeviceHeldTwice(s);
        }
    }

    /** Same, for the required-device check: read once the pick misses the required GPU 3, read again it has it. */
    @Test
    void aPickListThatNamesTheRequiredDeviceOnlyWhenReadAgainIsNotGranted() {
        Node node = Node.uniform(4);
        Rigged rigged = new Rigged();
        try (GpuScheduler s = scheduler(node, rigged)) {
            rigged.answer = (r, v) -> new AbstractList<>() {
                final AtomicInteger reads = new AtomicInteger();

                @Override
                public Integer get(int i) {
                    // first reading [1, 0]; every later reading [3, 0]
                    return i == 1 ? 0 : reads.getAndIncrement() == 0 ? 1 : 3;
                }

                @Override
                public int size() {
                    return 2;
                }
            };
            try {
                Allocation a = s.allocate(GpuRequest.builder().count(2).requiredDevices(3).build());
                assertThat(a.deviceIndices()).contains(3).doesNotHaveDuplicates();
            } catch (GpuException e) {
                assertThat(e).isNotInstanceOf(GpuAllocationException.class);
            }
            assertNoDeviceHeldTwice(s);
            for (Allocation a : s.allocations()) {
                assertThat(a.deviceIndices()).as("a request requiring GPU 3").contains(3);
            }
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    @Test
    void everyKindOfBadPickIsRejectedAsAStrategyBugAndChangesNothing() {
        Node node = Node.uniform(6);
        Rigged rigged = new Rigged();
        try (GpuScheduler s = scheduler(node, rigged)) {
            // GPU 5 is held, so it is not a candidate
            rigged.answer = (r, v) -> List.of(5);
            Allocation held = s.allocate(GpuRequest.builder().count(1).build());
            assertThat(held.deviceIndices()).containsExactly(5);
            List<Object> before = observable(s);
            List<List<Integer>> bad = new ArrayList<>();
            bad.add(List.of(0, 0)); // duplicate
            bad.add(java.util.Arrays.asList(0, null)); // null element
            bad.add(List.of(0, 5)); // a device that is not a candidate (held)
            bad.add(List.of(0, 77)); // not on the node
            bad.add(List.of(0, -1)); // negative
            bad.add(List.of(0, 1, 2)); // too many
            bad.add(List.of(0)); // too few
            bad.add(List.of(0, 1)); // misses the required 4 (asked below)
            List raw = new ArrayList();
            raw.add(0);
            raw.add(1L); // heap pollution: a Long where an Integer belongs
            bad.add(raw);
            for (List<Integer> pick : bad) {
                rigged.answer = (r, v) -> pick;
                GpuRequest req = pick.equals(List.of(0, 1)) ? GpuRequest.builder().count(2).requiredDevices(4).build()
                        : GpuRequest.builder().count(2).build();
                assertThatThrownBy(() -> s.allocate(req)).as("pick %s", pick).isInstanceOf(GpuException.class)
                        .isNotInstanceOf(GpuAllocationException.class).hasMessageContaining("rigged");
                assertThat(observable(s)).as("after the bad pick %s", pick).isEqualTo(before);
            }
            // declining is not a bug: NO_PLACEMENT, nothing changed
            for (List<Integer> decline : java.util.Arrays.asList(List.<Integer>of(), (List<Integer>) null)) {
                rigged.answer = (r, v) -> decline;
                assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(2).build()))
                        .isInstanceOfSatisfying(GpuAllocationException.class,
                                e -> assertThat(e.reason()).isEqualTo(GpuAllocationException.Reason.NO_PLACEMENT));
                assertThat(observable(s)).isEqualTo(before);
            }
            // a strategy that throws: the error reaches the caller and nothing changed
            rigged.answer = (r, v) -> {
                throw new IllegalStateException("boom");
            };
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().count(2).build())).hasMessageContaining("boom");
            assertThat(observable(s)).isEqualTo(before);
            // and a correct pick still works afterwards
            rigged.answer = (r, v) -> List.of(2, 4);
            assertThat(s.allocate(GpuRequest.builder().count(2).build()).deviceIndices()).containsExactly(2, 4);
            assertNoDeviceHeldTwice(s);
        }
    }

    /** A strategy that mutates the list after returning it: the allocation keeps what was returned and checked. */
    @Test
    void aPickListMutatedAfterSelectReturnsDoesNotChangeTheAllocation() {
        Node node = Node.uniform(4);
        Rigged rigged = new Rigged();
        List<List<Integer>> returned = new ArrayList<>();
        rigged.answer = (r, v) -> {
            List<Integer> l = new ArrayList<>(List.of(0, 1));
            returned.add(l);
            return l;
        };
        try (GpuScheduler s = scheduler(node, rigged)) {
            Allocation a = s.allocate(GpuRequest.builder().count(2).build());
            returned.get(0).set(0, 3);
            returned.get(0).add(2);
            assertThat(a.deviceIndices()).containsExactly(0, 1);
            assertThat(s.allocation(a.id()).orElseThrow().deviceIndices()).containsExactly(0, 1);
            assertThat(s.devices().get(3).isIdle()).isTrue();
            assertNoDeviceHeldTwice(s);
        }
    }

    /** Views kept past select must stay what they were: the cached snapshot must never be the live array. */
    @Test
    void aViewKeptAfterSelectNeverChanges() {
        Node node = Node.uniform(5);
        Rigged rigged = new Rigged();
        List<SchedulingView> kept = new ArrayList<>();
        List<List<DeviceState>> seenDevices = new ArrayList<>();
        List<List<DeviceState>> seenCandidates = new ArrayList<>();
        rigged.answer = (r, v) -> {
            kept.add(v);
            seenDevices.add(List.copyOf(v.devices()));
            seenCandidates.add(List.copyOf(v.candidates()));
            assertThatThrownBy(() -> v.devices().set(0, v.devices().get(1)))
                    .isInstanceOf(UnsupportedOperationException.class);
            assertThatThrownBy(() -> v.candidates().clear()).isInstanceOf(UnsupportedOperationException.class);
            return List.of(v.candidates().get(0).index());
        };
        try (GpuScheduler s = scheduler(node, rigged)) {
            Allocation a = s.allocate(GpuRequest.builder().count(1).build());
            Allocation b = s.allocate(GpuRequest.builder().count(1).build());
            // every kind of change after the views were handed out
            s.updateMetrics(
                    new GpuSample(Instant.now(), List.of(GpuMetrics.of(0, 99, MemorySize.ofGibibytes(1), 80, 300,
                            Instant.now()))));
            node.change(2, GpuHealth.lost("fell off the bus"));
            s.release(a.id());
            s.allocate(GpuRequest.builder().count(1).build());
            s.release(b.id());
            for (int k = 0; k < kept.size() - 1; k++) {
                SchedulingView v = kept.get(k);
                assertThat(v.devices()).as("view %d devices", k).isEqualTo(seenDevices.get(k));
                assertThat(v.candidates()).as("view %d candidates", k).isEqualTo(seenCandidates.get(k));
                for (DeviceState d : seenDevices.get(k)) {
                    assertThat(v.device(d.index())).isEqualTo(d);
                }
            }
            // and the views did differ from each other (the test saw real changes)
            assertThat(seenDevices.get(0)).isNotEqualTo(seenDevices.get(1));
        }
    }
}
