package io.gpusched.server;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The console's HTTP worker threads. Threads start on demand and end after 30 s idle: a client that stalls mid-request
 * holds one worker until the JDK server's request time limit cuts it ({@link ConsoleServer#JDK_MAX_REQ_TIME}), so many
 * workers keep others served. Each open event stream holds one more worker for its life, and the pool grows by one
 * for it ({@link #hold}), so {@code threads} workers stay for everything else.
 */
final class ConsoleWorkers implements Executor {
    private final int threads;
    private final ThreadPoolExecutor pool;
    private final Object lock = new Object();
    /** worker threads held by event streams; the pool's size is {@code threads} plus these */
    private int held;

    ConsoleWorkers(int threads) {
        this.threads = threads;
        this.pool = new ThreadPoolExecutor(threads, threads, 30, TimeUnit.SECONDS, new ArrayBlockingQueue<>(4096),
                daemon("gpusched-console-http"), new ThreadPoolExecutor.AbortPolicy());
        pool.allowCoreThreadTimeOut(true);
    }

    @Override
    public void execute(Runnable command) {
        pool.execute(command);
    }

    /** @param delta +1 when a handler starts holding its worker, -1 when it gives it back */
    void hold(int delta) {
        synchronized (lock) {
            held += delta;
            int n = threads + held;
            if (delta > 0) { // the maximum never goes below the core size
                pool.setMaximumPoolSize(n);
                pool.setCorePoolSize(n);
            } else {
                pool.setCorePoolSize(n);
                pool.setMaximumPoolSize(n);
            }
        }
    }

    /** @return worker threads held by open event streams */
    int held() {
        synchronized (lock) {
            return held;
        }
    }

    void shutdownNow() {
        pool.shutdownNow();
    }

    /** @return a factory of daemon threads named {@code name-1}, {@code name-2}, ... */
    static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
