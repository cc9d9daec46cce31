package io.gpusched.service.adversarial.review10;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.server.Caller;
import io.gpusched.service.NodeService;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/** A request that waits in the node service's queue, made in a thread of its own (the reviews' fair-queue tests). */
public final class Queued implements AutoCloseable {
    public final AtomicBoolean gone = new AtomicBoolean();
    public final CompletableFuture<Allocation> result = new CompletableFuture<>();
    private final NodeService s;
    private final Caller who;

    private Queued(NodeService s, Caller who) {
        this.s = s;
        this.who = who;
    }

    /** Queues {@code flags} for {@code who} with a wait of 10 minutes; returns once it is in the queue. */
    public static Queued queue(NodeService s, Caller who, String... flags) throws InterruptedException {
        return queue(s, who, Duration.ofMinutes(10), flags);
    }

    /** Queues {@code flags} for {@code who} with {@code wait}; returns once it is in the queue (or answered). */
    public static Queued queue(NodeService s, Caller who, Duration wait, String... flags) throws InterruptedException {
        return queue(s, who, GpuRequests.fromCliFlags(List.of(flags)), wait);
    }

    /** Queues {@code request} for {@code who} with a wait of 10 minutes; returns once it is in the queue. */
    public static Queued queue(NodeService s, Caller who, GpuRequest request) throws InterruptedException {
        return queue(s, who, request, Duration.ofMinutes(10));
    }

    private static Queued queue(NodeService s, Caller who, GpuRequest request, Duration wait)
            throws InterruptedException {
        Queued w = new Queued(s, who);
        int before = s.queueView().size();
        Thread t = new Thread(() -> {
            try {
                w.result.complete(s.allocate(who, request, Optional.of(wait),
                        w.gone::get));
            } catch (Throwable e) {
                w.result.completeExceptionally(e);
            }
        });
        t.setDaemon(true);
        t.start();
        if (!Clients.await(() -> s.queueView().size() > before || w.result.isDone(), 60)) {
            throw new IllegalStateException("not queued within 60 s");
        }
        return w;
    }

    @Override
    public void close() throws InterruptedException {
        gone.set(true);
        if (Clients.await(result::isDone, 30) && !result.isCompletedExceptionally()) {
            s.release(who, result.join().id());
        }
    }
}
