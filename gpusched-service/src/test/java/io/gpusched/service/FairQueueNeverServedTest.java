package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.Allocation;
import io.gpusched.core.ComputeCapability;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link FairQueue#neverServed}, which refuses a waiting request when it is queued, against the scheduler itself: on
 * the same node with nothing held, healthy and in the pool, a request it lets through must be granted, and one it
 * refuses must be refused, for a reason that is not transient (waiting would not help). Seeded random requests over
 * counts, memory, compute capability, vendor, model globs, named GPUs (some not on the node), required GPUs and
 * shared reservations, on NVIDIA, AMD and mixed-memory nodes.
 */
class FairQueueNeverServedTest {

    @ParameterizedTest
    @ValueSource(strings = {"dgx1-v100", "dgx-h100", "mi210-8x", "pcie-4xa10"})
    void refusesExactlyWhatAnEmptyNodeRefuses(String node) {
        Random rnd = new Random(node.hashCode());
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated(node)).build()) {
            List<GpuDevice> devices = s.inventory().devices();
            int tried = 0;
            int refused = 0;
            for (int i = 0; i < 2000; i++) {
                GpuRequest r;
                try {
                    r = random(rnd, devices);
                } catch (IllegalArgumentException | IllegalStateException notARequest) {
                    continue;
                }
                tried++;
                Optional<GpuAllocationException> never = FairQueue.neverServed(r, devices);
                Allocation a;
                try {
                    a = s.allocate(r);
                } catch (GpuAllocationException e) {
                    refused++;
                    assertThat(e.reason().isTransient()).as("the empty node's refusal of %s: %s %s", r, e.reason(),
                            e.getMessage()).isFalse();
                    assertThat(never).as("neverServed of %s, which the empty node refuses (%s: %s)", r, e.reason(),
                            e.getMessage()).isPresent();
                    assertThat(never.get().reason().isTransient()).isFalse();
                    continue;
                }
                s.release(a.id());
                assertThat(never).as("neverServed of %s, which the empty node grants (%s)", r, a.deviceIndices())
                        .isEmpty();
            }
            assertThat(tried).as("requests tried").isGreaterThan(1000);
            assertThat(refused).as("of %d tried, refused", tried).isBetween(100, tried - 100);
        }
    }

    private static GpuRequest random(Random rnd, List<GpuDevice> devices) {
        int n = devices.size();
        GpuRequest.Builder b = GpuRequest.builder();
        int count = 1 + rnd.nextInt(n + 1);
        if (rnd.nextInt(6) == 0) { // named GPUs, now and then one the node does not have
            List<Integer> all = new ArrayList<>(IntStream.range(0, n + 2).boxed().toList());
            Collections.shuffle(all, rnd);
            List<Integer> named = all.subList(0, Math.min(all.size(), 1 + rnd.nextInt(3)));
            if (rnd.nextBoolean()) {
                b.deviceIndices(named);
            } else {
                b.deviceUuids(named.stream().map(k -> k < n ? devices.get(k).uuid() : "GPU-not-here-" + k)
                        .toList());
            }
            count = named.size();
        } else if (rnd.nextInt(6) == 0) {
            b.requiredDevices(List.of(rnd.nextInt(n + 1)));
        }
        b.count(count);
        if (rnd.nextInt(3) == 0) {
            b.minMemory(MemorySize.ofGibibytes(new int[]{8, 16, 24, 32, 40, 64, 80, 96}[rnd.nextInt(8)]));
        }
        if (rnd.nextInt(5) == 0) {
            b.minComputeCapability(ComputeCapability.parse(new String[]{"6.0", "7.0", "8.0", "9.0"}[rnd.nextInt(4)]));
        }
        if (rnd.nextInt(5) == 0) {
            b.vendor(rnd.nextBoolean() ? GpuVendor.NVIDIA : GpuVendor.AMD);
        }
        if (rnd.nextInt(6) == 0) {
            b.modelPattern(new String[]{"*V100*", "*A10*", "*MI210*", "*H100*", "*"}[rnd.nextInt(5)]);
        }
        if (rnd.nextInt(5) == 0) {
            b.shared(MemorySize.ofGibibytes(new int[]{1, 8, 20, 48, 100}[rnd.nextInt(5)]));
        }
        return b.build();
    }
}
