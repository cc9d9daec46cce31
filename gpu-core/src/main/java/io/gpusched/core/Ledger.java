package io.gpusched.core;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Runs every change of a scheduler as one transaction on its {@link NodeState}: in memory only, or against a
 * {@link LedgerFile} shared by every process of the node. With a ledger, changes that arrive while another is being
 * written are decided together and share one OS-lock hold and one force to disk (group commit: they wait for the
 * batch in flight on a monitor of their own, not on the state lock it holds through its force); each is still
 * decided on the state left by the ones before it, so a refusal of one does not affect the others.
 *
 * <p>Gathering: the threads of a finished batch return and queue their next changes a few microseconds after the
 * next batch has already been taken, so without help the committing threads settle into two groups that alternate
 * forces. The leader of a batch therefore first waits, without any lock, for the threads of the previous batch that
 * have not queued yet, at most about one force time (a moving average of this ledger's batches, capped at
 * {@link #MAX_GATHER_NANOS}); a lone thread (previous batch of one) never waits.
 */
final class Ledger implements AutoCloseable {

    /**
     * A change, decided on the up-to-date state. It must not modify the state: it returns the records that make the
     * change, which the ledger applies (and writes).
     */
    @FunctionalInterface
    interface Change<T> {
        /**
         * @param state   the state, caught up with every process's changes
         * @param nextSeq the sequence the first returned record will get
         */
        Decision<T> decide(NodeState state, long nextSeq);
    }

    /**
     * @param records what to append, in order
     * @param result  what the caller gets once they are durable
     * @param undo    undoes what deciding did outside the state (a spent rate-limit token) when the records could
     *                not be written; null when there is nothing to undo
     */
    record Decision<T>(List<LedgerRecord> records, T result, Runnable undo) {
        Decision(List<LedgerRecord> records, T result) {
            this(records, result, null);
        }

        static <T> Decision<T> of(T result, LedgerRecord... records) {
            return new Decision<>(List.of(records), result);
        }

        /** @return this decision, with {@code r} run (under the lock) if its records cannot be written */
        Decision<T> onAbort(Runnable r) {
            return new Decision<>(records, result, r);
        }
    }

    /** The longest a leader waits for the threads of the previous batch, whatever the force costs. */
    static final long MAX_GATHER_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private static final class Pending<T> {
        final Change<T> change;
        final Thread owner = Thread.currentThread();
        volatile boolean done;
        T result;
        RuntimeException error;
        /** The decision's undo, run if the batch it is in cannot be written. */
        Runnable undo;

        Pending(Change<T> change) {
            this.change = change;
        }
    }

    private final LedgerFile file;
    private final Change<List<AllocationEvent>> housekeeping;
    private final Consumer<List<AllocationEvent>> events;
    private final Runnable changed;
    private final ReentrantLock lock = new ReentrantLock();
    /** Tickets of transactions, in the order they were applied (under {@link #lock}). */
    private long ticketsIssued;
    /** Guards {@link #undelivered}, {@link #nextToDeliver} and {@link #deliverer}. */
    private final Object delivery = new Object();
    private final Map<Long, List<AllocationEvent>> undelivered = new HashMap<>();
    private long nextToDeliver;
    private Thread deliverer;
    private final ConcurrentLinkedQueue<Pending<?>> queue = new ConcurrentLinkedQueue<>();
    /**
     * Group commit: the changes queued while one batch is being written and forced wait on this monitor, not on
     * {@link #lock} (which the batch holds through its force), so that the next batch takes all of them at once.
     */
    private final Object gate = new Object();
    /** Guarded by gate: a thread is running a batch. */
    private boolean leading;
    /** The threads whose changes made the last batch; written by its leader only. */
    private volatile Thread[] lastBatch = new Thread[0];
    /** The leader waiting for the previous batch's threads to queue, or null; woken by every change queued. */
    private volatile Thread gathering;
    /** Moving average of a batch's time under the lock (catch-up, decide, append, force), in ns; leader only. */
    private volatile long batchNanos;
    /**
     * When not negative, how long a leader waits for the previous batch's threads (tests: long, to make it certain).
     */
    private volatile long gatherOverrideNanos = -1;
    /** Guarded by lock. */
    private NodeState state;
    private volatile List<DeviceState> published;

    /**
     * @param initial      the devices, idle
     * @param file         the node ledger, or null for a purely in-memory scheduler
     * @param housekeeping run first in every transaction that may have allocations to end (dead holders' allocations,
     *                     leases that end them); its result is events to fire beyond those of its records
     * @param events       receives the events of applied records (this process's and others'), outside the lock
     * @param changed      called (under the lock) after the state changed
     */
    Ledger(NodeState initial, LedgerFile file, Change<List<AllocationEvent>> housekeeping,
            Consumer<List<AllocationEvent>> events,
            Runnable changed) {
        this.file = file;
        this.housekeeping = housekeeping;
        this.events = events;
        this.changed = changed;
        this.state = initial;
        if (file != null) {
            List<AllocationEvent> ignored = new ArrayList<>();
            this.state = file.open(initial, ignored);
        }
        this.published = state.snapshot();
    }

    /** @return true when changes go to a node ledger */
    boolean durable() {
        return file != null;
    }

    /** @return the node ledger, or null */
    LedgerFile file() {
        return file;
    }

    /** @return the device states as last published (no catch-up) */
    List<DeviceState> devices() {
        return published;
    }

    /** Runs a change as one transaction and returns its result once it is durable. */
    <T> T commit(Change<T> change) {
        Pending<T> p = new Pending<>(change);
        List<AllocationEvent> out = new ArrayList<>();
        long ticket = -1;
        if (file == null) {
            lock.lock();
            try {
                long before = state.sequence;
                run(p, out);
                if (state.sequence != before) {
                    published = state.snapshot();
                    changed.run();
                }
                ticket = ticketsIssued++;
            } finally {
                lock.unlock();
            }
        } else {
            queue.add(p);
            Thread g = gathering;
            if (g != null) {
                LockSupport.unpark(g);
            }
            if (lead(p)) {
                try {
                    gather();
                    lock.lock();
                    try {
                        long t0 = System.nanoTime();
                        batch(out);
                        ticket = ticketsIssued++;
                        long t = System.nanoTime() - t0;
                        long avg = batchNanos;
                        batchNanos = avg == 0 ? t : avg + (t - avg) / 8;
                    } finally {
                        lock.unlock();
                    }
                } finally {
                    synchronized (gate) {
                        leading = false;
                        gate.notifyAll();
                    }
                }
            }
        }
        if (ticket >= 0) {
            deliver(ticket, out);
        }
        if (p.error != null) {
            throw p.error;
        }
        return p.result;
    }

    /**
     * Hands the events of the transaction that took {@code ticket} to {@link #events}, after those of every earlier
     * transaction: the threads that applied them leave the lock in any order, and a listener (the accounting sampler,
     * the console) must never see an allocation released before it saw it granted. The thread that finds no delivery
     * running delivers what is ready in ticket order (its own, and others' handed over meanwhile) outside every lock;
     * a thread whose turn has not come, or that changes the ledger from inside a listener, leaves its events to that
     * thread and returns.
     */
    private void deliver(long ticket, List<AllocationEvent> out) {
        synchronized (delivery) {
            undelivered.put(ticket, out);
            if (deliverer != null) {
                return;
            }
            deliverer = Thread.currentThread();
        }
        boolean done = false;
        try {
            while (true) {
                List<AllocationEvent> next;
                synchronized (delivery) {
                    next = undelivered.remove(nextToDeliver);
                    if (next == null) {
                        deliverer = null;
                        done = true;
                        return;
                    }
                    nextToDeliver++;
                }
                if (!next.isEmpty()) {
                    events.accept(next); // the scheduler's fire: each listener's failure is caught there
                }
            }
        } finally {
            if (!done) { // an Error left the loop: the next transaction's thread delivers what is left
                synchronized (delivery) {
                    deliverer = null;
                }
            }
        }
    }

    /**
     * Waits, without holding {@link #lock}, until {@code p} was written by another thread's batch or no batch is in
     * flight; in the second case this thread leads the next batch (which takes {@code p} and everything queued while
     * the last one was being forced).
     *
     * @return true when the caller must run the batch, false when {@code p} is done
     */
    private boolean lead(Pending<?> p) {
        boolean interrupted = false;
        try {
            synchronized (gate) {
                while (!p.done && leading) {
                    try {
                        gate.wait();
                    } catch (InterruptedException e) {
                        interrupted = true; // the change is queued: it is decided and written whatever happens
                    }
                }
                if (p.done) {
                    return false;
                }
                leading = true;
                return true;
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The leader, before it takes the queue: waits (no lock held) until every thread of the previous batch has queued
     * a change again, or about one batch time has passed, or this thread is interrupted.
     */
    private void gather() {
        Thread[] last = lastBatch;
        if (last.length < 2) {
            return;
        }
        long fixed = gatherOverrideNanos;
        long wait = fixed >= 0 ? fixed : Math.min(MAX_GATHER_NANOS, batchNanos);
        if (wait <= 0) {
            return;
        }
        long deadline = System.nanoTime() + wait;
        gathering = Thread.currentThread();
        try {
            while (!allQueued(last) && !Thread.currentThread().isInterrupted()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                LockSupport.parkNanos(this, left);
            }
        } finally {
            gathering = null;
        }
    }

    private boolean allQueued(Thread[] threads) {
        for (Thread t : threads) {
            if (t.isAlive() && !queuedBy(t)) {
                return false;
            }
        }
        return true;
    }

    private boolean queuedBy(Thread t) {
        for (Pending<?> q : queue) {
            if (q.owner == t) {
                return true;
            }
        }
        return false;
    }

    /** For tests: the longest a leader waits for the previous batch's threads, instead of about one batch time. */
    void gatherFor(long nanos) {
        gatherOverrideNanos = nanos;
    }

    /** For tests: how many changes are queued for the next batch. */
    int queued() {
        return queue.size();
    }

    /** For tests: the thread now waiting for the previous batch's threads, or null. */
    Thread gathering() {
        return gathering;
    }

    /** Catches up with other processes (and reclaims dead holders' allocations) now. */
    void refresh() {
        commit((s, seq) -> Decision.of(null));
    }

    /** Catches up, then reads the state under the lock. */
    <T> T read(Function<NodeState, T> reader) {
        if (file != null) {
            refresh();
        }
        lock.lock();
        try {
            return reader.apply(state);
        } finally {
            lock.unlock();
        }
    }

    /** Reads the state as this process last knew it, without catching up. */
    <T> T readLocal(Function<NodeState, T> reader) {
        lock.lock();
        try {
            return reader.apply(state);
        } finally {
            lock.unlock();
        }
    }

    /** Changes process-local facts (health, metrics) under the lock; they are not written to the ledger. */
    void local(Consumer<NodeState> change) {
        lock.lock();
        try {
            change.accept(state);
            published = state.snapshot();
            changed.run();
        } finally {
            lock.unlock();
        }
    }

    private <T> void run(Pending<T> p, List<AllocationEvent> out) {
        try {
            if (state.needsHousekeeping()) {
                Decision<List<AllocationEvent>> h = housekeeping.decide(state, state.sequence + 1);
                applyAll(h, out, null);
                out.addAll(h.result());
            }
            Decision<T> d = p.change.decide(state, state.sequence + 1);
            applyAll(d, out, null);
            p.result = d.result();
        } catch (RuntimeException e) {
            p.error = e;
        } finally {
            p.done = true;
        }
    }

    private void applyAll(Decision<?> d, List<AllocationEvent> out, List<LedgerCodec.Entry> written) {
        for (LedgerRecord r : d.records()) {
            long seq = state.sequence + 1;
            state.apply(seq, r, out);
            if (written != null) {
                written.add(new LedgerCodec.Entry(seq, r));
            }
        }
    }

    /** Caller holds the lock: decides every queued change under one OS lock and writes them with one force. */
    private void batch(List<AllocationEvent> out) {
        long seqBefore = state.sequence;
        NodeState stateBefore = state;
        List<Pending<?>> batch = new ArrayList<>();
        for (Pending<?> q; (q = queue.poll()) != null;) {
            batch.add(q);
        }
        lastBatch = batch.stream().map(q -> q.owner).distinct().toArray(Thread[]::new);
        try {
            file.transaction(state, caughtUp -> {
                state = caughtUp.state();
                out.addAll(caughtUp.events());
                NodeState before = state.copy();
                int eventsBefore = out.size();
                List<LedgerCodec.Entry> written = new ArrayList<>();
                if (state.needsHousekeeping()) {
                    Decision<List<AllocationEvent>> h = housekeeping.decide(state, state.sequence + 1);
                    applyAll(h, out, written);
                    out.addAll(h.result());
                }
                for (Pending<?> p : batch) {
                    decideInto(p, out, written);
                }
                try {
                    file.append(written);
                } catch (RuntimeException e) {
                    state = before;
                    out.subList(eventsBefore, out.size()).clear();
                    for (Pending<?> p : batch) {
                        if (p.error == null) {
                            p.result = null;
                            p.error = e;
                            if (p.undo != null) {
                                p.undo.run();
                            }
                        }
                    }
                }
                return state;
            });
        } catch (RuntimeException e) {
            for (Pending<?> p : batch) {
                if (p.error == null && !p.done) {
                    p.error = e;
                }
            }
        } finally {
            if (state != stateBefore || state.sequence != seqBefore) {
                published = state.snapshot();
                changed.run();
            }
            for (Pending<?> p : batch) {
                p.done = true;
            }
        }
    }

    private <T> void decideInto(Pending<T> p, List<AllocationEvent> out, List<LedgerCodec.Entry> written) {
        try {
            Decision<T> d = p.change.decide(state, state.sequence + 1);
            applyAll(d, out, written);
            p.result = d.result();
            p.undo = d.undo();
        } catch (RuntimeException e) {
            p.error = e;
        }
    }

    @Override
    public void close() {
        if (file != null) {
            file.close();
        }
    }
}
