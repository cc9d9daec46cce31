package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.testing.ManualClock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The scheduler's parts: required devices, unknown memory, rate limits, health and drain probing, group commit. */
class SchedulerPartsTest {

    static GpuDevice dev(int i, boolean memoryKnown) {
        GpuDevice.Builder b = GpuDevice.builder().index(i).uuid("GPU-p-" + i).vendor(GpuVendor.NVIDIA)
                .name("NVIDIA A10").pciBusId("b" + i).numaNode(0).minor(i);
        return (memoryKnown ? b.memory(MemorySize.ofGibibytes(24)) : b.memoryUnknown()).build();
    }

    static GpuInventory inventory(List<GpuDevice> devices) {
        io.gpusched.core.sim.SimulatedGpuInventory.Builder b =
                io.gpusched.core.sim.SimulatedGpuInventory.builder("parts");
        devices.forEach(b::device);
        return b.build();
    }

    /** Takes the first candidates, or a fixed answer. */
    static AllocationStrategy firstOr(List<Integer> fixed) {
        return new AllocationStrategy() {
            @Override
            public String name() {
                return "first";
            }

            @Override
            public List<Integer> select(GpuRequest r, SchedulingView v) {
                return fixed != null ? fixed
                        : v.candidates().stream().limit(r.count()).map(DeviceState::index).toList();
            }
        };
    }

    static GpuScheduler scheduler(GpuInventory inv, AllocationStrategy s, GpuConfig c) {
        return GpuScheduler.builder().inventory(inv).strategy(s).config(c).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
    }

    @Test
    void requiredDevicesMustExistBeFreeAndBeInThePick() {
        List<GpuDevice> devs = List.of(dev(0, true), dev(1, true), dev(2, true), dev(3, true));
        GpuScheduler s = scheduler(inventory(devs), firstOr(null), GpuConfig.defaults());
        GpuAllocationException e = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(7).build()));
        assertThat(e.reason()).isEqualTo(Reason.UNKNOWN_DEVICE);
        assertThat(e.getMessage()).contains("required GPU index 7");
        Allocation held = s.allocate(GpuRequest.builder().deviceIndices(2).build());
        e = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().count(2).requiredDevices(2).build()));
        assertThat(e.reason()).isEqualTo(Reason.DEVICE_BUSY);
        assertThat(e.getMessage()).contains("GPU 2").contains(held.id());
        s.release(held.id());
        // a strategy that ignores the required device is caught as a bug, and nothing is allocated
        GpuScheduler ignoring = scheduler(inventory(devs), firstOr(List.of(0, 1)), GpuConfig.defaults());
        assertThatThrownBy(() -> ignoring.allocate(GpuRequest.builder().count(2).requiredDevices(3).build()))
                .isInstanceOf(GpuException.class).hasMessageContaining("including the required [3]");
        assertThat(ignoring.allocations()).isEmpty();
        GpuScheduler honouring = scheduler(inventory(devs), firstOr(List.of(3, 0)), GpuConfig.defaults());
        assertThat(honouring.allocate(GpuRequest.builder().count(2).requiredDevices(3).build()).deviceIndices())
                .containsExactly(3, 0);
    }

    @Test
    void aDeviceOfUnknownMemoryTakesNoMemoryConstrainedRequest() {
        GpuScheduler s = scheduler(inventory(List.of(dev(0, false))), firstOr(null), GpuConfig.defaults());
        GpuAllocationException e = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().minMemory(MemorySize.ofGibibytes(1)).build()));
        assertThat(e.reason()).isEqualTo(Reason.INSUFFICIENT_MEMORY);
        assertThat(e.getMessage()).contains("memory size").contains("unknown");
        e = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().shared(MemorySize.ofGibibytes(1)).deviceIndices(0).build()));
        assertThat(e.reason()).isEqualTo(Reason.INSUFFICIENT_MEMORY);
        assertThat(e.getMessage()).contains("memory size is unknown");
        assertThat(s.allocate(GpuRequest.builder().build()).deviceIndices()).containsExactly(0);
    }

    /** Only granted allocations spend tokens: a refusal for another reason leaves the owner's budget alone. */
    @Test
    void refusalsSpendNoRateLimitTokens() {
        ManualClock clock = new ManualClock(Instant.parse("2026-03-01T00:00:00Z"));
        GpuScheduler s = GpuScheduler.builder().inventory(inventory(List.of(dev(0, true), dev(1, true))))
                .strategy(firstOr(null)).config(GpuConfig.builder().rateLimit(1, 2).build()).clock(clock)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
        for (int i = 0; i < 5; i++) {
            GpuAllocationException e = catchThrowableOfType(GpuAllocationException.class,
                    () -> s.allocate(GpuRequest.builder().owner("o").deviceIndices(9).build()));
            assertThat(e.reason()).isEqualTo(Reason.UNKNOWN_DEVICE);
        }
        s.allocate(GpuRequest.builder().owner("o").build());
        s.allocate(GpuRequest.builder().owner("o").build());
        GpuAllocationException limited = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().owner("o").build()));
        assertThat(limited.reason()).isEqualTo(Reason.RATE_LIMITED);
        clock.advance(Duration.ofSeconds(1));
        GpuAllocationException busy = catchThrowableOfType(GpuAllocationException.class,
                () -> s.allocate(GpuRequest.builder().owner("o").build()));
        assertThat(busy.reason()).as("a token is back; the node is full").isEqualTo(Reason.INSUFFICIENT_GPUS);
        s.release(s.allocations().get(0).id());
        assertThat(s.allocate(GpuRequest.builder().owner("o").build())).as("the busy refusal cost no token")
                .isNotNull();
    }

    /** A health change that happens while the scheduler reads initial health is not lost. */
    @Test
    void theHealthListenerIsRegisteredBeforeInitialHealthIsRead() {
        GpuDevice d = dev(0, true);
        List<GpuHealthListener> registered = new ArrayList<>();
        GpuInventory inv = new GpuInventory() {
            @Override
            public String backend() {
                return "racy";
            }

            @Override
            public List<GpuDevice> devices() {
                return List.of(d);
            }

            @Override
            public GpuTopology topology() {
                return inventory(List.of(d)).topology();
            }

            @Override
            public GpuSample sample() {
                return inventory(List.of(d)).sample();
            }

            @Override
            public GpuHealth health(GpuDevice x) {
                // the device breaks right after its health is read: the listener must already be there
                registered.forEach(l -> l.onHealthChange(d, GpuHealth.lost("fell off the bus")));
                return GpuHealth.HEALTHY;
            }

            @Override
            public Optional<List<GpuProcess>> processes(GpuDevice x) {
                throw new IllegalStateException("GPU 0 is gone");
            }

            @Override
            public void addHealthListener(GpuHealthListener l) {
                registered.add(l);
            }

            @Override
            public void removeHealthListener(GpuHealthListener l) {
                registered.remove(l);
            }

            @Override
            public void close() {
            }
        };
        GpuScheduler s = scheduler(inv, firstOr(null), GpuConfig.defaults());
        assertThat(registered).as("registered").hasSize(1);
        assertThat(s.devices().get(0).health().isHealthy()).as("the change heard during the read wins").isFalse();
        assertThat(s.status().drainSupported()).as("a throwing process listing does not stop the build").isFalse();
        s.close();
        assertThat(registered).isEmpty();
    }

    // Group commit (changes that wait during a force share the next one) is counted from outside, as real fdatasync
    // calls, in LedgerForceOrderTest.
}
