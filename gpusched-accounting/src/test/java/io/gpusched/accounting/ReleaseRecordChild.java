package io.gpusched.accounting;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.host.GpuNode;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Releases from many threads at once in a process of its own, for the crash test: each thread feeds the node's sampler
 * an allocation's grant and its release (times on one fixed UTC day, so every record goes to one journal) and prints
 * {@code ACK <id>} once the release's {@link AccountingSampler#onEvent} returned, until it is killed (or has done its
 * count, then {@code DONE}).
 */
public final class ReleaseRecordChild {
    /** Each allocation is held this long (its interval's length). */
    public static final long HELD_MILLIS = 7;

    private ReleaseRecordChild() {
    }

    /** @param args the state directory, threads, releases per thread, the first grant's time (epoch ms) */
    public static void main(String[] args) throws InterruptedException {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        int each = Integer.parseInt(args[2]);
        Instant base = Instant.ofEpochMilli(Long.parseLong(args[3]));
        GpuNode node = GpuNode.builder().inventory("simulated:dgx1-v100").stateDir(dir).auditLogging(false)
                .maintenanceInterval(Duration.ZERO).build();
        AccountingSampler s = AccountingSampler.open(AccountingStore.at(dir), AccountingSettings.defaults(),
                node.inventory(), null, new HostIdleEffects(node.scheduler()), Clock.fixed(base, ZoneOffset.UTC))
                .orElseThrow();
        List<GpuDevice> devices = node.inventory().devices();
        List<Thread> all = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int me = t;
            Thread th = new Thread(() -> {
                String uuid = devices.get(me % devices.size()).uuid();
                for (int j = 0; j < each; j++) {
                    String id = "r" + me + "-" + j;
                    Instant from = base.plusMillis((long) j * threads + me);
                    s.onEvent(event(AllocationEvent.Type.ALLOCATED, from, id, uuid));
                    s.onEvent(event(AllocationEvent.Type.RELEASED, from.plusMillis(HELD_MILLIS), id, uuid));
                    System.out.println("ACK " + id);
                }
            });
            th.start();
            all.add(th);
        }
        for (Thread t : all) {
            t.join();
        }
        System.out.println("DONE");
    }

    /** @return an allocation event of one GPU, owned by alice */
    public static AllocationEvent event(AllocationEvent.Type type, Instant at, String id, String uuid) {
        return new AllocationEvent(type, at, Optional.of(id), Optional.of("alice"), Optional.empty(), List.of(uuid),
                Optional.empty(), type.name().toLowerCase());
    }
}
