package io.gpusched.service;

import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuScheduler;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Holds the first events of one type in the thread that fired them (the thread making the change: a grant, a renew)
 * until the test lets them go, so a test catches a change while it is under way. It listens from construction;
 * {@link #close} lets go and stops listening.
 */
public final class HeldEvents implements AllocationListener, AutoCloseable {
    private final GpuScheduler scheduler;
    private final AllocationEvent.Type type;
    private final int most;
    private final AtomicInteger taken = new AtomicInteger();
    private final AtomicInteger held = new AtomicInteger();
    private final AtomicInteger ended = new AtomicInteger();
    private final CountDownLatch letGo = new CountDownLatch(1);

    /**
     * @param scheduler whose events to hold
     * @param type      the events held
     * @param most      how many are held (later ones pass)
     */
    public HeldEvents(GpuScheduler scheduler, AllocationEvent.Type type, int most) {
        this.scheduler = scheduler;
        this.type = type;
        this.most = most;
        scheduler.addListener(this);
    }

    @Override
    public void onEvent(AllocationEvent e) {
        if (e.type() != type || taken.getAndIncrement() >= most) {
            return;
        }
        held.incrementAndGet();
        try {
            letGo.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
        }
        ended.incrementAndGet();
    }

    /** @return whether {@code n} events are held (or were), waiting up to 60 s */
    public boolean awaitHeld(int n) throws InterruptedException {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (held.get() < n) {
            if (System.nanoTime() - until > 0) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /** Lets every held event go, and those that come later pass. */
    public void letGo() {
        letGo.countDown();
    }

    /** @return how many held events were let go and went on */
    public int ended() {
        return ended.get();
    }

    /** Lets go and stops listening. */
    @Override
    public void close() {
        letGo();
        scheduler.removeListener(this);
    }
}
