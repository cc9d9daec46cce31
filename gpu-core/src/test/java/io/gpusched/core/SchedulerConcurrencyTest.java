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
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** 8 threads allocate and release at random on a 64-GPU node; an independent checker judges what they were given. */
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

    /** What one worker was given: devices held from {@code ack} (after allocate returned) to {@code released}. */
    record Held(String id, List<Integer> devices, long sharedBytes, long ack, long released) {
    }

    /**
     * 8 threads allocate and release at random on a 64-GPU node. Each worker records what it was given and when
     * (a global counter read after allocate returned and before release was called); an independent checker then
     * judges that record, not the scheduler's own view: no GPU held by two exclusive allocations at one moment, no
     * GPU over-reserved, no id twice. Refusals other than "busy" cannot happen in this setup and fail the test.
     */
    @Test
    void invariantsHoldUnderConcurrentAllocateAndRelease() throws Exception {
        SimulatedGpuInventory inv = node64();
        GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).maintenanceInterval(
                java.time.Duration.ZERO).build();
        List<DeviceState> initial = s.devices();
        AtomicLong clock = new AtomicLong();
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        ExecutorService pool = Executors.newFixedThreadPool(8);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<List<Held>>> workers = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            long seed = 42 + t;
            workers.add(pool.submit(() -> {
                Random rnd = new Random(seed);
                List<Held> record = new ArrayList<>();
                List<Held> mine = new ArrayList<>();
                start.await();
                for (int op = 0; op < 3000; op++) {
                    if (!mine.isEmpty() && (rnd.nextInt(100) < 45 || mine.size() > 6)) {
                        Held h = mine.remove(rnd.nextInt(mine.size()));
                        long at = clock.incrementAndGet();
                        if (!s.release(h.id())) {
                            violations.add("release of live " + h.id() + " returned false");
                        }
                        record.add(new Held(h.id(), h.devices(), h.sharedBytes(), h.ack(), at));
                        continue;
                    }
                    GpuRequest r = randomRequest(rnd);
                    try {
                        Allocation a = s.allocate(r);
                        long at = clock.incrementAndGet();
                        if (a.devices().size() != r.count()) {
                            violations.add("got " + a.devices().size() + " devices for " + r);
                        }
                        mine.add(new Held(a.id(), a.deviceIndices(), r.sharedMemory().map(MemorySize::bytes)
                                .orElse(0L), at, Long.MAX_VALUE));
                    } catch (GpuAllocationException e) {
                        if (e.reason() != GpuAllocationException.Reason.INSUFFICIENT_GPUS
                                && e.reason() != GpuAllocationException.Reason.DEVICE_BUSY) {
                            violations.add("a refusal that cannot happen here: " + e.reason() + ": " + e.getMessage());
                        }
                    }
                }
                record.addAll(mine);
                return record;
            }));
        }
        start.countDown();
        List<Held> all = new ArrayList<>();
        for (Future<List<Held>> w : workers) {
            all.addAll(w.get(120, TimeUnit.SECONDS));
        }
        pool.shutdown();
        check(all, inv, violations);
        assertThat(violations).isEmpty();
        assertThat(all).as("the workers did real work").hasSizeGreaterThan(1000);
        for (Held h : all) {
            if (h.released() == Long.MAX_VALUE) {
                assertThat(s.release(h.id())).isTrue();
            }
        }
        assertThat(s.allocations()).isEmpty();
        assertThat(s.devices()).isEqualTo(initial);
    }

    /** The independent checker: at every acknowledgement, what was held at that moment fits the node. */
    private static void check(List<Held> all, SimulatedGpuInventory inv, ConcurrentLinkedQueue<String> v) {
        Set<String> ids = new HashSet<>();
        for (Held h : all) {
            if (!ids.add(h.id())) {
                v.add("allocation " + h.id() + " handed out twice");
            }
        }
        for (Held at : all) {
            long t = at.ack();
            Map<Integer, String> exclusive = new HashMap<>();
            Map<Integer, Long> reserved = new HashMap<>();
            for (Held h : all) {
                if (h.ack() > t || h.released() < t) {
                    continue;
                }
                for (int d : h.devices()) {
                    if (h.sharedBytes() == 0) {
                        String prev = exclusive.put(d, h.id());
                        if (prev != null) {
                            v.add("at " + t + ": GPU " + d + " held by " + prev + " and " + h.id());
                        }
                    } else {
                        reserved.merge(d, h.sharedBytes(), Long::sum);
                    }
                }
            }
            for (Map.Entry<Integer, Long> e : reserved.entrySet()) {
                if (exclusive.containsKey(e.getKey())) {
                    v.add("at " + t + ": GPU " + e.getKey() + " both exclusive and shared");
                }
                if (e.getValue() > inv.devices().get(e.getKey()).memory().bytes()) {
                    v.add("at " + t + ": GPU " + e.getKey() + " over-reserved: " + e.getValue());
                }
            }
        }
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
}
