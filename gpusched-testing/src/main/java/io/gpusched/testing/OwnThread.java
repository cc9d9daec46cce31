package io.gpusched.testing;

import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * Runs a test's blocking task (a process it waits for, a client that waits for an answer, a job's driver) on a daemon
 * thread of its own, never on the common fork-join pool: on JDK 25 with one CPU's parallelism (a 2-CPU machine) that
 * pool runs one task at a time, so a second blocking task waits behind the first, and whatever the product completes
 * on that pool waits too. (On JDK 17 {@code CompletableFuture} gives each async task a thread of its own there.)
 */
public final class OwnThread {
    private OwnThread() {
    }

    /** @return the task's result, computed on a new daemon thread */
    public static <T> CompletableFuture<T> supply(Supplier<T> task) {
        return CompletableFuture.supplyAsync(task, r -> {
            Thread t = new Thread(r, "test-own-thread");
            t.setDaemon(true);
            t.start();
        });
    }

    /** @return completes once the task has run on a new daemon thread */
    public static CompletableFuture<Void> run(Runnable task) {
        return supply(() -> {
            task.run();
            return null;
        });
    }
}
