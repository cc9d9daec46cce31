package io.gpusched.core.adversarial.gather;

import io.gpusched.core.GpuScheduler;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A second process for {@link GatherHistoryAttackTest}: {@code <state dir> <threads> <cycles> <acks file>}; waits for
 * {@code <acks file>.go} to exist, runs the workload on the shared ledger, writes its acknowledgements.
 */
public final class GatherChild {
    private GatherChild() {
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        int cycles = Integer.parseInt(args[2]);
        Path out = Path.of(args[3]);
        List<String> acks = Collections.synchronizedList(new ArrayList<>());
        try (GpuScheduler s = Work.scheduler(dir)) {
            Files.writeString(Path.of(args[3] + ".ready"), "ready");
            while (!Files.exists(Path.of(args[3] + ".go"))) {
                Thread.sleep(5);
            }
            List<Thread> ts = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread th = new Thread(() -> {
                    for (int i = 0; i < cycles; i++) {
                        Work.cycle(s, acks);
                    }
                });
                th.start();
                ts.add(th);
            }
            for (Thread th : ts) {
                th.join();
            }
        }
        Files.write(out, acks);
        System.exit(0);
    }
}
