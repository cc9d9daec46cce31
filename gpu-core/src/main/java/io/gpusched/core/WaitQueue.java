package io.gpusched.core;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * The waiting allocations of one process, served first come, first served: only the head of the queue tries; the
 * others sleep until it leaves (with devices, a permanent refusal, a timeout, an interrupt or any other error: a
 * waiter always hands the queue on). The head wakes when this process changes the state ({@link #signal()}) or, with
 * a node ledger, when the ledger file changes (another process released), which it polls with a backoff from 1 to
 * 50 ms. While it waits it also asks, at the same pace, whether a live allocation's holder process is gone, so a
 * waiter is served by reclaiming a dead holder's GPUs itself, with or without a maintenance thread.
 */
final class WaitQueue {
    private static final long MIN_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final Supplier<Object> externalStamp;
    private final BooleanSupplier reclaimable;
    private long nextTicket;
    private long serving;
    private long version;
    private final Set<Long> abandoned = new HashSet<>();
    private boolean closed;

    /** @param externalStamp changes when another process may have changed the state; null without a ledger */
    WaitQueue(Supplier<Object> externalStamp) {
        this(externalStamp, () -> false);
    }

    /**
     * @param externalStamp changes when another process may have changed the state; null without a ledger
     * @param reclaimable   true when a live allocation's holder is gone (a try would reclaim it); asked without
     *                      this queue's lock held, so it may take the scheduler's
     */
    WaitQueue(Supplier<Object> externalStamp, BooleanSupplier reclaimable) {
        this.externalStamp = externalStamp;
        this.reclaimable = reclaimable;
    }

    /** Something changed in this process: wake the head. */
    void signal() {
        lock.lock();
        try {
            version++;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** The scheduler is closing: every waiter wakes and fails; later waits fail at once. */
    void close() {
        lock.lock();
        try {
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new GpuException("the scheduler was closed while this allocation waited; nothing was allocated");
        }
    }

    /** @return a ticket; the caller must {@link #leave} it */
    long enter() {
        lock.lock();
        try {
            return nextTicket++;
        } finally {
            lock.unlock();
        }
    }

    /** What the head saw before trying: compared by {@link #awaitChange}. */
    record Mark(long version, Object stamp) {
    }

    /** @return a mark to wait on after a failed try */
    Mark mark() {
        lock.lock();
        try {
            return new Mark(version, externalStamp == null ? null : externalStamp.get());
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until {@code ticket} is at the head of the queue.
     *
     * @return false if the deadline passed first
     */
    boolean awaitTurn(long ticket, long deadlineNanos) throws InterruptedException {
        lock.lockInterruptibly();
        try {
            checkOpen();
            while (serving != ticket) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                changed.awaitNanos(left);
                checkOpen();
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The head waits until the state may have changed since {@code mark}.
     *
     * @return false if the deadline passed first
     */
    boolean awaitChange(Mark mark, long deadlineNanos) throws InterruptedException {
        long poll = MIN_POLL_NANOS;
        lock.lockInterruptibly();
        try {
            while (version == mark.version()) {
                checkOpen();
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                changed.awaitNanos(Math.min(left, poll));
                poll = Math.min(MAX_POLL_NANOS, poll * 2);
                if (version != mark.version()) {
                    break;
                }
                if (externalStamp != null && !externalStamp.get().equals(mark.stamp())) {
                    return true;
                }
                lock.unlock(); // the probe takes the scheduler's lock, which holders of it take before ours
                boolean gone;
                try {
                    gone = reclaimable.getAsBoolean();
                } finally {
                    lock.lock();
                }
                if (gone) {
                    return true;
                }
            }
            checkOpen();
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Leaves the queue, handing it on if {@code ticket} was the head. Never fails. */
    void leave(long ticket) {
        lock.lock();
        try {
            if (ticket == serving) {
                serving++;
                while (abandoned.remove(serving)) {
                    serving++;
                }
            } else if (ticket > serving) {
                abandoned.add(ticket);
            }
            version++;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** @return tickets waiting (head included), for status */
    long waiting() {
        lock.lock();
        try {
            return nextTicket - serving - abandoned.size();
        } finally {
            lock.unlock();
        }
    }
}
