package io.gpusched.core;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Run in a child JVM by {@link JournalTest}: allocates and releases in a loop on a journaled scheduler and prints
 * "A id" after each acknowledged allocation, "r id" before and "R id" after each release, into a log file (which,
 * unlike a pipe, keeps every line written before the kill). Killed with SIGKILL.
 */
public final class JournalCrashChild {
    private JournalCrashChild() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(args[2], true), true,
                java.nio.charset.StandardCharsets.UTF_8);
        Random rnd = new Random(Long.parseLong(args[1]));
        try (GpuScheduler s = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx-h100"))
                .journal(Path.of(args[0])).auditLogging(false).build()) {
            List<String> mine = new ArrayList<>();
            for (Allocation a : s.allocations()) {
                mine.add(a.id());
            }
            out.println("READY " + mine.size());
            while (true) {
                if (!mine.isEmpty() && (rnd.nextBoolean() || mine.size() > 12)) {
                    String id = mine.remove(rnd.nextInt(mine.size()));
                    out.println("r " + id);
                    s.release(id);
                    out.println("R " + id);
                } else {
                    GpuRequest r = rnd.nextBoolean() ? GpuRequest.builder().owner("crash").build()
                            : GpuRequest.builder().shared(MemorySize.ofGibibytes(1 + rnd.nextInt(8))).build();
                    s.tryAllocate(r).ifPresent(a -> {
                        mine.add(a.id());
                        out.println("A " + a.id());
                    });
                }
            }
        }
    }
}
