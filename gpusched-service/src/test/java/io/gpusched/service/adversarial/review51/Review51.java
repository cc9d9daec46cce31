package io.gpusched.service.adversarial.review51;

import io.gpusched.service.adversarial.review10.Clients;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** What review51's attacks share: a job's process found by its name. */
final class Review51 {
    private Review51() {
    }

    /** @return the pid of the first process named {@code comm} in the job cgroups under {@code parent} */
    static String awaitProcess(Path parent, String comm, int seconds) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < until) {
            for (String p : Clients.jobProcesses(parent)) {
                try {
                    if (Files.readString(Path.of("/proc", p, "comm")).strip().equals(comm)) {
                        return p;
                    }
                } catch (IOException gone) {
                    // not it
                }
            }
            Thread.sleep(10);
        }
        throw new AssertionError("no process " + comm + " in the job cgroups (" + Clients.jobProcesses(parent) + ")");
    }
}
