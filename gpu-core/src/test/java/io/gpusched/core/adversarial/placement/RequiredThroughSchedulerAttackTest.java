package io.gpusched.core.adversarial.placement;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationStrategies;
import io.gpusched.core.AllocationStrategy;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuProcess;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.SchedulingView;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * Required devices end to end: the scheduler, not the strategy, is the last line. A strategy that drops or invents
 * devices is caught and nothing is handed out; required devices that are held, unhealthy or unknown are refused with
 * a reason. Every fact is read from the allocations returned, never from the scheduler's own bookkeeping alone.
 */
class RequiredThroughSchedulerAttackTest {

    static GpuScheduler scheduler(SimulatedGpuInventory inv, AllocationStrategy s) {
        return GpuScheduler.builder().inventory(inv).strategy(s).auditLogging(false).build();
    }

    /** Returns the best topology answer with its first required device swapped for another candidate. */
    static AllocationStrategy dropsRequired() {
        AllocationStrategy topo = AllocationStrategies.topologyAware();
        return new AllocationStrategy() {
            @Override
            public String name() {
                return "drops-required";
            }

            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) {
                List<Integer> got = new ArrayList<>(topo.select(request, view));
                if (request.requiredDevices().isEmpty()) {
                    return got;
                }
                int req = request.requiredDevices().get(0);
                for (DeviceState c : view.candidates()) {
                    if (!got.contains(c.index())) {
                        got.set(got.indexOf(req), c.index());
                        return got;
                    }
                }
                throw new AssertionError("no spare candidate");
            }
        };
    }

    @Test
    void strategyThatDropsARequiredDeviceIsCaught() {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        try (GpuScheduler s = scheduler(inv, dropsRequired())) {
            GpuRequest req = GpuRequest.builder().count(2).requiredDevices(4).build();
            // a strategy bug, not a refusal: the base type, naming the strategy and the required device
            GpuException e = assertThrows(GpuException.class, () -> s.allocate(req));
            assertTrue(e.getMessage().contains("drops-required") && e.getMessage().contains("[4]"), e.getMessage());
            assertTrue(s.allocations().isEmpty());
            // nothing half-done: the whole node can still be taken by one request
            Allocation all = s.allocate(GpuRequest.builder().count(8).build());
            assertEquals(Set.of(0, 1, 2, 3, 4, 5, 6, 7), new HashSet<>(all.deviceIndices()));
        }
    }

    @Test
    void strategyThatReturnsDuplicatesIsCaught() {
        SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
        AllocationStrategy dup = new AllocationStrategy() {
            @Override
            public String name() {
                return "dup";
            }

            @Override
            public List<Integer> select(GpuRequest request, SchedulingView view) {
                if (request.requiredDevices().isEmpty()) {
                    return AllocationStrategies.topologyAware().select(request, view);
                }
                return List.of(request.requiredDevices().get(0), request.requiredDevices().get(0));
            }
        };
        try (GpuScheduler s = scheduler(inv, dup)) {
            GpuException e = assertThrows(GpuException.class,
                    () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(3).build()));
            assertTrue(e.getMessage().contains("[3, 3]"), e.getMessage());
            assertEquals(8, s.allocate(GpuRequest.builder().count(8).build()).deviceIndices().size());
        }
    }

    @Test
    void heldUnhealthyUnknownRequiredAreRefusedWithAReason() {
        for (String name : AllocationStrategies.names()) {
            SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
            try (GpuScheduler s = scheduler(inv, AllocationStrategies.byName(name))) {
                Allocation held = s.allocate(GpuRequest.builder().deviceIndices(5).build());
                assertEquals(List.of(5), held.deviceIndices());
                GpuAllocationException busy = assertThrows(GpuAllocationException.class,
                        () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(5).build()));
                assertEquals(GpuAllocationException.Reason.DEVICE_BUSY, busy.reason(), name + ": " + busy.getMessage());

                inv.setHealth(6, GpuHealth.unhealthy("XID 79"));
                GpuAllocationException sick = assertThrows(GpuAllocationException.class,
                        () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(6).build()));
                assertEquals(GpuAllocationException.Reason.DEVICE_UNHEALTHY, sick.reason(),
                        name + ": " + sick.getMessage());

                for (int unknown : List.of(8, 60000)) {
                    GpuAllocationException u = assertThrows(GpuAllocationException.class,
                            () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(unknown).build()));
                    assertEquals(GpuAllocationException.Reason.UNKNOWN_DEVICE, u.reason(),
                            name + ": " + u.getMessage());
                    assertTrue(u.getMessage().contains(String.valueOf(unknown)), u.getMessage());
                }
                // none of the refusals took anything: the 6 healthy free devices are all still there
                Allocation rest = s.allocate(GpuRequest.builder().count(6).build());
                assertEquals(Set.of(0, 1, 2, 3, 4, 7), new HashSet<>(rest.deviceIndices()), name);
            }
        }
    }

    @Test
    void drainingRequiredDeviceIsRefusedAndNothingIsTaken() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("drain-node").tracksProcesses(true);
        for (int i = 0; i < 4; i++) {
            b.device(PlacementAttackTest.device(i, 0));
        }
        SimulatedGpuInventory inv = b.build();
        for (String name : AllocationStrategies.names()) {
            try (GpuScheduler s = scheduler(inv, AllocationStrategies.byName(name))) {
                Allocation a = s.allocate(GpuRequest.builder().deviceIndices(2).build());
                inv.setProcesses(2, List.of(new GpuProcess(4242, java.util.Optional.empty())));
                assertTrue(s.release(a.id()));
                DeviceState two = s.devices().stream().filter(d -> d.index() == 2).findFirst().orElseThrow();
                assertEquals(DeviceState.Pool.DRAINING, two.pool(), name + ": a process is still on GPU 2");
                GpuAllocationException e = assertThrows(GpuAllocationException.class,
                        () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(2).build()));
                assertTrue(e.getMessage().contains("2"), name + ": " + e.getMessage());
                Allocation rest = s.allocate(GpuRequest.builder().count(3).build());
                assertEquals(Set.of(0, 1, 3), new HashSet<>(rest.deviceIndices()), name);
                s.release(rest.id());
                inv.setProcesses(2, List.of());
                s.maintain();
            }
        }
    }

    @Test
    void requiredPlusBestPartnerOnADgx1() {
        for (String name : List.of("topology", "topology-remaining", "thermal")) {
            SimulatedGpuInventory inv = GpuInventories.simulated("dgx1-v100");
            try (GpuScheduler s = scheduler(inv, AllocationStrategies.byName(name))) {
                Allocation a = s.allocate(GpuRequest.builder().count(2).requiredDevices(4).build());
                assertTrue(a.deviceIndices().contains(4), name + " " + a.deviceIndices());
                int other = a.deviceIndices().get(0) == 4 ? a.deviceIndices().get(1) : a.deviceIndices().get(0);
                long best = 0;
                var t = inv.topology();
                for (int d = 0; d < 8; d++) {
                    if (d != 4) {
                        best = Math.max(best, PlacementAttackTest.setScore(t, List.of(4, d)));
                    }
                }
                assertEquals(best, PlacementAttackTest.setScore(t, List.of(4, other)), name + " " + a.deviceIndices());
            }
        }
    }
}
