package io.gpusched.core;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

/**
 * A child JVM for {@link CrossProcessFairnessTest}. Arguments: {@code wait|loop stateDir nodeYaml logFile stopFile
 * [count]}. Log lines are flushed one by one: {@code READY <pid>} first; {@code wait} logs {@code W} before
 * {@code allocate(count GPUs, 10 min)}, then {@code G <id>} (or {@code T <reason>}), holds until the stop file exists,
 * releases and logs {@code DONE}; {@code loop} (or {@code waitloop}: waiting up to 10 min) allocates one GPU
 * without waiting and releases it, over and over,
 * logging {@code A <id>} after each grant, {@code R <id>} after each release and {@code X} after each refusal, until
 * the stop file exists.
 */
public final class FairnessChild {
    private FairnessChild() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Path dir = Path.of(args[1]);
        Path stop = Path.of(args[4]);
        try (PrintStream out = new PrintStream(new java.io.FileOutputStream(args[3], true), true,
                StandardCharsets.UTF_8);
             GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated(args[2])).stateDir(dir)
                     .auditLogging(false).maintenanceInterval(Duration.ZERO).build()) {
            out.println("READY " + ProcessHandle.current().pid());
            if (mode.equals("wait")) {
                out.println("W");
                Allocation a;
                try {
                    a = s.allocate(GpuRequest.builder().owner("waiter").count(Integer.parseInt(args[5])).build(),
                            Duration.ofMinutes(10));
                } catch (GpuAllocationException e) {
                    out.println("T " + e.reason() + " " + e.getMessage());
                    return;
                }
                out.println("G " + a.id());
                while (!Files.exists(stop)) {
                    Thread.sleep(5);
                }
                s.release(a.id());
                out.println("DONE");
            } else {
                GpuRequest one = GpuRequest.builder().owner("looper").count(1).build();
                boolean waiting = mode.equals("waitloop");
                while (!Files.exists(stop)) {
                    try {
                        Allocation a = waiting ? s.allocate(one, Duration.ofMinutes(10)) : s.allocate(one);
                        out.println("A " + a.id());
                        s.release(a.id());
                        out.println("R " + a.id());
                    } catch (GpuAllocationException e) {
                        out.println("X");
                        Thread.sleep(1);
                    }
                }
                out.println("DONE");
            }
        }
    }
}
