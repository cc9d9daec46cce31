package io.gpusched.core;

import io.gpusched.core.GpuAllocationException.Reason;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;
import java.util.Random;

/**
 * A child JVM for {@link QuotaTest}: allocates one GPU at a time for alice (uid 1001, limit 3 by {@code gpu.users})
 * and releases at random, on a shared state directory. Arguments: stateDir seed ops logFile. It logs {@code A <id>}
 * after each acknowledged allocation, {@code Q} after each quota refusal, {@code DONE} at the end and {@code ERR
 * <text>} (exit 3) on any other refusal but a busy node.
 */
public final class QuotaChild {
    private QuotaChild() {
    }

    static GpuScheduler scheduler(Path dir) {
        GpuConfig config = GpuConfig.builder().users(new UserQuotas(3, Map.of(), Map.of())).build();
        return GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir).config(config)
                .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
    }

    static GpuRequest alice() {
        return GpuRequest.builder().owner("alice").ownerUid(1001).build();
    }

    public static void main(String[] args) throws Exception {
        Random rnd = new Random(Long.parseLong(args[1]));
        long ops = Long.parseLong(args[2]);
        try (PrintStream out = new PrintStream(new FileOutputStream(args[3], true), true, StandardCharsets.UTF_8);
             GpuScheduler s = scheduler(Path.of(args[0]))) {
            Deque<String> mine = new ArrayDeque<>();
            for (long i = 0; i < ops; i++) {
                if (!mine.isEmpty() && rnd.nextInt(3) == 0) {
                    s.release(mine.poll());
                    continue;
                }
                try {
                    mine.add(s.allocate(alice()).id());
                    out.println("A " + mine.peekLast());
                } catch (GpuAllocationException e) {
                    if (e.reason() == Reason.QUOTA_EXCEEDED) {
                        out.println("Q");
                    } else if (e.reason() != Reason.INSUFFICIENT_GPUS) {
                        out.println("ERR " + e.reason() + ": " + e.getMessage());
                        System.exit(3);
                    }
                }
            }
            out.println("DONE");
        }
    }
}
