package io.gpusched.core;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.sim.SimulatedGpuInventory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** 8 threads allocate and release at random on a 64-GPU node while a checker audits every snapshot. */
class SchedulerConcurrencyTest {

    static SimulatedGpuInventory node64() {
        SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("test-64");
        for (int i = 0; i < 64; i++) {
            b.device(GpuDevice.builder().index(i).uuid("GPU-test-" + i).vendor(GpuVendor.NVIDIA)
                    .name(i % 2 == 0 ? "NVIDIA A100-SXM4-80GB" : "NVIDIA A100-SXM4-40GB")
                    .memory(MemorySize.ofGibibytes(i % 2 == 0 ? 80 : 40))
                    .computeCapability(new ComputeCapability(8, 0)).pciBusId(String.format("00000000:%02X:00.0", i))
                    .numaNode(i / 16).minor(i).build());
        }
        for (int i = 0; i < 64; i += 2) {
            b.links(i, i + 1, 12);
        }
        return b.build();
    }

    @Test
    void invariantsHoldUnderConcurrentAllocateAndRelease() throws Exception {
        SimulatedGpuInventory inv = node64();
        AtomicInteger allocated = new AtomicInteger();
        AtomicInteger released = new AtomicInteger();
        GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false)
                .listener(e -> {
                    if (e.type() == AllocationEvent.Type.ALLOCATED) {
                        allocated.incrementAndGet();
                    } else if (e.type() == AllocationEvent.Type.RELEASED) {
                        released.incrementAndGet();
                    }
                }).build();
        List<DeviceState> initial = s.devices();
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        AtomicBoolean done = new AtomicBoolean();
        ExecutorService pool = Executors.newFixedThreadPool(9);
        Future<?> checker = pool.submit(() -> {
            int checks = 0;
            while (!done.get() || checks < 10) {
                check(s.allocations(), inv, violations);
                checkStates(s.devices(), violations);
                checks++;
            }
        });
        CountDownLatch start = new CountDownLatch(1);
        List<Future<List<String>>> workers = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            long seed = 42 + t;
            workers.add(pool.submit(() -> {
                Random rnd = new Random(seed);
                List<String> mine = new ArrayList<>();
                start.await();
                for (int op = 0; op < 3000; op++) {
                    if (!mine.isEmpty() && (rnd.nextInt(100) < 45 || mine.size() > 6)) {
                        String id = mine.remove(rnd.nextInt(mine.size()));
                        if (!s.release(id)) {
                            violations.add("release of live " + id + " returned false");
                        }
                        continue;
                    }
                    GpuRequest r = randomRequest(rnd);
                    try {
                        Allocation a = s.allocate(r);
                        if (a.devices().size() != r.count()) {
                            violations.add("got " + a.devices().size() + " devices for " + r);
                        }
                        mine.add(a.id());
                    } catch (GpuAllocationException e) {
                        if (!e.reason().isTransient() && e.reason() != GpuAllocationException.Reason.INSUFFICIENT_MEMORY
                                && e.reason() != GpuAllocationException.Reason.INSUFFICIENT_GPUS) {
                            violations.add("unexpected refusal " + e.reason() + ": " + e.getMessage());
                        }
                    }
                }
                return mine;
            }));
        }
        start.countDown();
        List<String> leftover = new ArrayList<>();
        for (Future<List<String>> w : workers) {
            leftover.addAll(w.get(120, TimeUnit.SECONDS));
        }
        done.set(true);
        checker.get(60, TimeUnit.SECONDS);
        pool.shutdown();
        assertThat(violations).isEmpty();
        assertThat(s.allocations()).hasSize(leftover.size());
        for (String id : leftover) {
            assertThat(s.release(id)).isTrue();
        }
        assertThat(s.allocations()).isEmpty();
        assertThat(s.devices()).isEqualTo(initial);
        assertThat(allocated.get()).isEqualTo(released.get()).isGreaterThan(1000);
    }

    private static GpuRequest randomRequest(Random rnd) {
        GpuRequest.Builder b = GpuRequest.builder();
        switch (rnd.nextInt(5)) {
            case 0 -> b.count(1 + rnd.nextInt(4));
            case 1 -> b.count(1 + rnd.nextInt(2)).minMemory(MemorySize.ofGibibytes(48));
            case 2 -> b.count(1 + rnd.nextInt(2)).shared(MemorySize.ofGibibytes(1 + rnd.nextInt(30)));
            case 3 -> b.deviceIndices(rnd.nextInt(64));
            default -> b.deviceIndices(rnd.nextInt(64)).shared(MemorySize.ofGibibytes(1 + rnd.nextInt(40)));
        }
        return b.build();
    }

    private static void check(List<Allocation> allocations, SimulatedGpuInventory inv, ConcurrentLinkedQueue<String> v) {
        Map<Integer, String> exclusive = new HashMap<>();
        Map<Integer, Long> reserved = new HashMap<>();
        Set<String> ids = new HashSet<>();
        for (Allocation a : allocations) {
            if (!ids.add(a.id())) {
                v.add("allocation " + a.id() + " listed twice");
            }
            for (GpuDevice d : a.devices()) {
                if (a.sharing() == SharingMode.EXCLUSIVE) {
                    String prev = exclusive.put(d.index(), a.id());
                    if (prev != null) {
                        v.add("GPU " + d.index() + " in two exclusive allocations " + prev + ", " + a.id());
                    }
                } else {
                    reserved.merge(d.index(), a.sharedMemory().get().bytes(), Long::sum);
                }
            }
        }
        for (Map.Entry<Integer, Long> e : reserved.entrySet()) {
            if (exclusive.containsKey(e.getKey())) {
                v.add("GPU " + e.getKey() + " both exclusive and shared");
            }
            if (e.getValue() > inv.devices().get(e.getKey()).memory().bytes()) {
                v.add("GPU " + e.getKey() + " over-reserved: " + e.getValue());
            }
        }
    }

    private static void checkStates(List<DeviceState> states, ConcurrentLinkedQueue<String> v) {
        for (DeviceState d : states) {
            if (d.sharedReserved().bytes() > d.device().memory().bytes()) {
                v.add("state of GPU " + d.index() + " over-reserved");
            }
        }
    }
}
