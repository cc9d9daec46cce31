package io.gpusched.core;

import io.gpusched.core.GpuAllocationException.Reason;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * A child JVM for the multi-process ledger tests: allocates, releases and renews at random on a scheduler over a
 * shared state directory. Arguments: stateDir seed ops logFile [stopFile]. It appends to its own log file (flushed
 * per line, so every line written before a SIGKILL is kept): {@code A <id> B|U} after an acknowledged allocation
 * (bound to this process or unbound), {@code r <id>} before and {@code R <id>} after a release, {@code N <id>} after
 * a renewal, {@code DONE <ops>} at the end, and {@code ERR <text>} (exit 3) on a refusal that cannot happen (only
 * busy-device refusals can: every request fits the node).
 *
 * <p>Run by hand: {@code java -cp <gpu-core test classpath> io.gpusched.core.LedgerChild DIR 1 1000 /tmp/c.log}.
 */
public final class LedgerChild {
    private static final Set<Reason> EXPECTED = Set.of(Reason.INSUFFICIENT_GPUS, Reason.DEVICE_BUSY);

    private LedgerChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        Random rnd = new Random(Long.parseLong(args[1]));
        long ops = Long.parseLong(args[2]);
        Path stop = args.length > 4 ? Path.of(args[4]) : null;
        try (PrintStream out = new PrintStream(new java.io.FileOutputStream(args[3], true), true,
                java.nio.charset.StandardCharsets.UTF_8);
             GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100")).stateDir(dir)
                     .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            HolderProcess me = HolderProcess.current();
            List<String> mine = new ArrayList<>();
            out.println("READY " + me.pid());
            long done = 0;
            for (; done < ops && (stop == null || !Files.exists(stop)); done++) {
                int dice = rnd.nextInt(100);
                if (!mine.isEmpty() && (dice < 40 || mine.size() > 4)) {
                    String id = mine.remove(rnd.nextInt(mine.size()));
                    out.println("r " + id);
                    if (!s.release(id)) {
                        out.println("ERR release of " + id + " returned false: released by someone else");
                        System.exit(3);
                    }
                    out.println("R " + id);
                } else if (!mine.isEmpty() && dice < 50) {
                    String id = mine.get(rnd.nextInt(mine.size()));
                    s.renew(id, Duration.ofHours(1 + rnd.nextInt(5)));
                    out.println("N " + id);
                } else {
                    boolean bound = rnd.nextBoolean();
                    GpuRequest.Builder b = GpuRequest.builder().owner("child-" + args[1]);
                    if (rnd.nextInt(3) == 0) {
                        b.shared(MemorySize.ofGibibytes(1 + rnd.nextInt(40)));
                    } else {
                        b.count(1 + rnd.nextInt(2));
                    }
                    if (rnd.nextInt(4) == 0) {
                        b.maxDuration(Duration.ofHours(2));
                    }
                    if (bound) {
                        b.holder(me);
                    }
                    try {
                        Allocation a = s.allocate(b.build());
                        mine.add(a.id());
                        out.println("A " + a.id() + " " + (bound ? "B" : "U"));
                    } catch (GpuAllocationException e) {
                        if (!EXPECTED.contains(e.reason())) {
                            out.println("ERR " + e.reason() + ": " + e.getMessage());
                            System.exit(3);
                        }
                    }
                }
            }
            out.println("DONE " + done);
        }
    }
}
