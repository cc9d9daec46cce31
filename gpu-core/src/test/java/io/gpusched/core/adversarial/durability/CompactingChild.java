package io.gpusched.core.adversarial.durability;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.NodeDescriptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * A child JVM for {@link CompactionKilledMidwayAttackTest}: on a state directory whose ledger compacts after (nearly)
 * every change ({@code -Dgpusched.ledger.compactBytes} small), it allocates detached single GPUs (at most two held),
 * renews and releases them forever, printing each step with {@link System#nanoTime()} (CLOCK_MONOTONIC, comparable
 * between processes of one machine) and flushing before the next: {@code ACK id uuid tCall tReturn},
 * {@code REL id tCall}, {@code DONE id tReturn}. Arguments: state directory, seed.
 */
public final class CompactingChild {
    private CompactingChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        Random r = new Random(Long.parseLong(args[1]));
        try (GpuScheduler s = GpuScheduler.builder()
                .inventory(NodeDescriptions.profile("pcie-4xa10"))
                .stateDir(dir)
                .maintenanceInterval(Duration.ZERO)
                .build()) {
            System.out.println("READY");
            System.out.flush();
            List<Allocation> held = new ArrayList<>();
            while (true) {
                int pick = r.nextInt(5);
                if (held.size() < 2 && pick < 3) {
                    long t0 = System.nanoTime();
                    Allocation a = s.tryAllocate(GpuRequest.builder().count(1).exclusive().owner("child-" + args[1])
                            .build()).orElse(null);
                    long t1 = System.nanoTime();
                    if (a != null) {
                        held.add(a);
                        System.out.println("ACK " + a.id() + " " + a.deviceUuids().get(0) + " " + t0 + " " + t1);
                        System.out.flush();
                    }
                } else if (!held.isEmpty() && pick == 3) {
                    s.renew(held.get(0).id(), Duration.ofHours(2));
                } else if (!held.isEmpty()) {
                    Allocation a = held.remove(r.nextInt(held.size()));
                    System.out.println("REL " + a.id() + " " + System.nanoTime());
                    System.out.flush();
                    if (!s.release(a.id())) {
                        System.out.println("LOST " + a.id());
                    }
                    System.out.println("DONE " + a.id() + " " + System.nanoTime());
                    System.out.flush();
                }
            }
        }
    }
}
