package io.gpusched.core.adversarial;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.Allocation;
import io.gpusched.core.ComputeCapability;
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
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Scheduler-side checks of issue 13 with a hostile inventory: health that changes while the scheduler is being built,
 * and devices whose memory is unknown.
 */
@Tag("adversarial")
class SchedulerHealthAttackTest {

    /** An inventory whose health reads can run a hook (to change health "in between"). */
    static final class HostileInventory implements GpuInventory {
        final List<GpuDevice> devices;
        final GpuHealth[] health;
        final List<GpuHealthListener> listeners = new CopyOnWriteArrayList<>();
        volatile BiConsumer<HostileInventory, GpuDevice> onHealthRead = (i, d) -> {};
        /** Answers processes(): by default every device lists none (drain supported). */
        volatile java.util.function.Function<GpuDevice, Optional<List<io.gpusched.core.GpuProcess>>> processes =
                d -> Optional.of(List.of());

        HostileInventory(List<GpuDevice> devices) {
            this.devices = devices;
            this.health = new GpuHealth[devices.size()];
            java.util.Arrays.fill(health, GpuHealth.HEALTHY);
        }

        void change(int i, GpuHealth h) {
            synchronized (health) {
                health[i] = h;
            }
            listeners.forEach(l -> l.onHealthChange(devices.get(i), h));
        }

        @Override
        public String backend() {
            return "hostile";
        }

        @Override
        public List<GpuDevice> devices() {
            return devices;
        }

        @Override
        public GpuTopology topology() {
            return GpuTopology.unconnected(devices);
        }

        @Override
        public GpuSample sample() {
            Instant now = Instant.now();
            return new GpuSample(now, devices.stream().map(d -> GpuMetrics.unavailable(d.index(), now)).toList());
        }

        @Override
        public GpuHealth health(GpuDevice device) {
            onHealthRead.accept(this, device);
            synchronized (health) {
                return health[device.index()];
            }
        }

        @Override
        public Optional<List<io.gpusched.core.GpuProcess>> processes(GpuDevice device) {
            return processes.apply(device);
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

    static GpuDevice device(int i, boolean memoryKnown) {
        GpuDevice.Builder b = GpuDevice.builder().index(i).uuid("GPU-00000000-0000-0000-0000-00000000000" + i)
                .vendor(GpuVendor.NVIDIA).name("Tesla V100-SXM2-32GB").computeCapability(new ComputeCapability(7, 0))
                .pciBusId(String.format("00000000:%02X:00.0", i + 6)).minor(i);
        if (memoryKnown) {
            b.memory(MemorySize.ofGibibytes(32));
        } else {
            b.memoryUnknown();
        }
        return b.build();
    }

    static GpuScheduler scheduler(GpuInventory inv) {
        return GpuScheduler.builder().inventory(inv).auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    static List<Integer> indices(Allocation a) {
        return a.devices().stream().map(GpuDevice::index).toList();
    }

    /**
     * Every health read the builder makes flips another device to LOST (and tells the listeners that are registered
     * by then). Whatever order the scheduler reads and registers in, no LOST device may be handed out afterwards.
     */
    @Test
    void healthChangesDuringConstructionAreNotLost() {
        for (int victim = 0; victim < 4; victim++) {
            HostileInventory inv = new HostileInventory(IntStream.range(0, 4).mapToObj(i -> device(i, true)).toList());
            int v = victim;
            boolean[] fired = {false};
            inv.onHealthRead = (self, d) -> {
                if (!fired[0] && d.index() != v) {
                    fired[0] = true;
                    self.change(v, GpuHealth.lost("fell off the bus while the scheduler was being built"));
                }
            };
            try (GpuScheduler s = scheduler(inv)) {
                inv.onHealthRead = (self, d) -> {};
                assertThat(fired[0]).as("victim %d: the hook ran", v).isTrue();
                assertThatThrownBy(() -> s.allocate(GpuRequest.builder().deviceIndices(v).build()))
                        .as("victim %d", v).isInstanceOf(GpuAllocationException.class);
                Allocation three = s.allocate(GpuRequest.builder().count(3).build());
                assertThat(indices(three)).as("victim %d", v).doesNotContain(v);
            }
        }
    }

    /** A change right after construction (the XID watcher firing at once) reaches the scheduler. */
    @Test
    void changeRightAfterConstructionIsSeen() {
        HostileInventory inv = new HostileInventory(IntStream.range(0, 2).mapToObj(i -> device(i, true)).toList());
        try (GpuScheduler s = scheduler(inv)) {
            inv.change(1, GpuHealth.unhealthy("XID 48"));
            assertThatThrownBy(() -> s.allocate(GpuRequest.builder().deviceIndices(1).build()))
                    .isInstanceOf(GpuAllocationException.class);
            inv.change(1, GpuHealth.HEALTHY);
            assertThat(indices(s.allocate(GpuRequest.builder().deviceIndices(1).build()))).containsExactly(1);
        }
    }

    @Test
    void unknownMemoryRefusesMemoryConstraintsWithAReasonButServesPlainRequests() {
        HostileInventory inv = new HostileInventory(List.of(device(0, false), device(1, false)));
        try (GpuScheduler s = scheduler(inv)) {
            GpuAllocationException e = (GpuAllocationException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> s.allocate(GpuRequest.builder().minMemory(MemorySize.ofGibibytes(1)).build()));
            assertThat(e).isNotNull();
            assertThat(e.getMessage().toLowerCase()).contains("unknown").contains("memory");
            GpuAllocationException shared = (GpuAllocationException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> s.allocate(GpuRequest.builder().shared(MemorySize.ofGibibytes(1)).build()));
            assertThat(shared).as("a shared reservation is a memory constraint too").isNotNull();
            assertThat(shared.getMessage().toLowerCase()).contains("unknown");
            Allocation plain = s.allocate(GpuRequest.builder().count(2).build());
            assertThat(indices(plain)).containsExactlyInAnyOrder(0, 1);
        }
    }

    @Test
    void unknownMemoryDeviceIsSkippedForMemoryRequestsWhenAKnownOneFits() {
        HostileInventory inv = new HostileInventory(List.of(device(0, false), device(1, true)));
        try (GpuScheduler s = scheduler(inv)) {
            List<Integer> got = new ArrayList<>(indices(
                    s.allocate(GpuRequest.builder().minMemory(MemorySize.ofGibibytes(16)).build())));
            assertThat(got).containsExactly(1);
            GpuAllocationException e = (GpuAllocationException) org.assertj.core.api.Assertions.catchThrowable(
                    () -> s.allocate(GpuRequest.builder().deviceIndices(0).minMemory(MemorySize.ofGibibytes(1))
                            .build()));
            assertThat(e).as("explicit unknown-memory device with a memory floor").isNotNull();
            assertThat(e.getMessage().toLowerCase()).contains("unknown");
            assertThat(Optional.of(s.allocate(GpuRequest.builder().count(1).build()))).isPresent();
        }
    }

    /** GPU 0 lost (its process list empty, or throwing) must not turn drain off for the node. */
    @Test
    void lostGpu0DoesNotTurnDrainOffForTheNode() {
        for (boolean throwing : new boolean[]{false, true}) {
            HostileInventory inv = new HostileInventory(IntStream.range(0, 3).mapToObj(i -> device(i, true)).toList());
            inv.change(0, GpuHealth.lost("GPU_IS_LOST"));
            inv.processes = d -> {
                if (d.index() == 0) {
                    if (throwing) {
                        throw new IllegalStateException("GPU is lost");
                    }
                    return Optional.empty();
                }
                return Optional.of(List.of());
            };
            try (GpuScheduler s = scheduler(inv)) {
                assertThat(s.status().drainSupported()).as("throwing=%s", throwing).isTrue();
            }
        }
    }

    /**
     * Every GPU lost when the scheduler is built: drain is undecided, not off for the scheduler's life. Once a GPU
     * answers its process list again, maintenance decides, and the next release drains.
     */
    @Test
    void drainIsDecidedOnceAGpuComesBackAfterAllWereLostAtBuild() {
        for (boolean throwing : new boolean[]{false, true}) {
            HostileInventory inv = new HostileInventory(IntStream.range(0, 2).mapToObj(i -> device(i, true)).toList());
            inv.change(0, GpuHealth.lost("GPU_IS_LOST"));
            inv.change(1, GpuHealth.lost("GPU_IS_LOST"));
            java.util.concurrent.atomic.AtomicBoolean back = new java.util.concurrent.atomic.AtomicBoolean();
            java.util.concurrent.atomic.AtomicInteger running = new java.util.concurrent.atomic.AtomicInteger(1);
            inv.processes = d -> {
                if (!back.get()) {
                    if (throwing) {
                        throw new IllegalStateException("GPU is lost");
                    }
                    return Optional.empty();
                }
                return Optional.of(running.get() > 0 ? List.of(new io.gpusched.core.GpuProcess(4242, Optional.empty()))
                        : List.of());
            };
            try (GpuScheduler s = scheduler(inv)) {
                assertThat(s.status().drainSupported()).as("throwing=%s", throwing).isFalse();
                assertThat(s.status().notes()).anyMatch(n -> n.contains("has answered a process listing yet"));
                s.maintain();
                assertThat(s.status().drainSupported()).as("still nobody answered").isFalse();
                inv.change(1, GpuHealth.HEALTHY);
                back.set(true);
                s.maintain();
                assertThat(s.status().drainSupported()).as("decided once GPU 1 answered (throwing=%s)", throwing)
                        .isTrue();
                Allocation a = s.allocate(GpuRequest.builder().deviceIndices(1).build());
                s.release(a.id());
                assertThat(s.devices().get(1).pool()).as("its process still runs: GPU 1 drains")
                        .isEqualTo(io.gpusched.core.DeviceState.Pool.DRAINING);
                running.set(0);
                s.maintain();
                assertThat(s.devices().get(1).pool()).isEqualTo(io.gpusched.core.DeviceState.Pool.IN_POOL);
            }
        }
    }

    /** A backend that cannot list processes at all still reads as no drain. */
    @Test
    void backendWithoutProcessListsHasNoDrain() {
        HostileInventory inv = new HostileInventory(IntStream.range(0, 3).mapToObj(i -> device(i, true)).toList());
        inv.processes = d -> Optional.empty();
        try (GpuScheduler s = scheduler(inv)) {
            assertThat(s.status().drainSupported()).isFalse();
        }
    }
}
