package io.gpusched.service;

import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.MemorySize;
import io.gpusched.core.ReleasesAndGrants;
import io.gpusched.core.SharingMode;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's queue of requests that wait for GPUs ({@code "wait"}), served fairly across users: <b>round-robin
 * between users, least recently served first</b> (the user whose last grant through the service, queued or not, is
 * oldest goes next; a user never served goes first), and first come, first served within one user. So one user's twenty
 * queued requests do not keep another user's one behind them all: each grant sends its user to the back.
 *
 * <p>Why least recently served rather than a fixed ring: it needs no ring position that new users would have to be
 * fitted into, and a user who just got GPUs without queueing (the node had room) also goes behind those who wait.
 *
 * <p>The next user's oldest request is tried first, and when it does not fit (too few GPUs free) every GPU it could
 * use ({@link GpuRequest#couldUse}: the GPUs it names, its model, memory, ...) is kept for it: a request later in fair
 * order is tried only on the others ({@link GpuScheduler#releaseEachThenAllocateInOrder(List, List, Set)}), so a large
 * request is never starved by small ones, while GPUs it could never use (held by its own user, a drained one it
 * names, another model) do not sit idle behind it. A request that does not wait ({@link #now}) takes the same road:
 * it is put in its fair place, tried once by the dispatcher when its turn comes, and refused (naming the queue's
 * request ahead of it) when what it needs is kept for a waiting request ahead of it. When nothing waits, nothing is
 * owed, and it is tried at once in its caller's thread (the same single try, without two thread hand-overs). Two
 * exceptions: a user whose request is over their quota (or rate limit) is skipped until they release (they cannot be
 * served anyway); a request that can never be served (too large for the node, a device it does not have) is refused
 * at once. A request whose client has gone, or whose wait ran out, is dropped.
 *
 * <p>How it composes with the core's node-wide queue ({@code WaitTickets}, strict first come first served across
 * processes): the service tries requests with a plain {@link GpuScheduler#allocate(GpuRequest)} (or several in fair
 * order in one {@link GpuScheduler#allocateInOrder} transaction), which takes no ticket. Requests that other
 * processes (engines) make with a wait hold tickets and are served first while they wait; the service's queue is
 * decided among the service's users. One thread of the service grants from the queue: on every
 * release, reclaim, expiry or drain change it hears from the scheduler (its own process's at once, other processes'
 * through a {@link GpuScheduler#refresh()} every {@link #TICK}), and on every new request.
 *
 * <p>Releases hand off: while requests wait, a caller's release ({@link #release}) is made by the dispatcher, in the
 * same transaction ({@link GpuScheduler#releaseEachThenAllocateInOrder}) as the grants of the fair next requests on
 * the state it leaves, so a release and the grant it makes possible share one forced write; releases that arrive while
 * one such transaction is written are made together in the next. The fair order is unchanged (only this thread grants,
 * in the same projected order), and each release still returns only once it is on disk.
 */
final class FairQueue implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(FairQueue.class);
    /** How often the queue looks for other processes' changes, timeouts and clients gone while it holds requests. */
    static final Duration TICK = Duration.ofMillis(200);
    /** Most waiting requests of one user. */
    static final int MAX_PER_USER = 256;
    /** Most waiting requests in all. */
    static final int MAX_TOTAL = 8192;
    /** How long {@link #close} waits for the dispatcher to end the transaction it is in before interrupting it. */
    static final Duration STOP_WAIT = Duration.ofSeconds(30);
    /** How long a request that does not wait waits for the dispatcher to try it (it answers in one pass). */
    static final Duration NOW_ANSWER = Duration.ofMinutes(2);
    /** Most requests tried in one transaction (one forced write): bounds the time the node's lock is held. */
    static final int BATCH = 64;
    /** Most of one user's later waiting requests tried around the queue's heads in one pass. */
    static final int PER_USER_BACKFILL = 8;

    /** Why a waiting request was dropped without an allocation. */
    static class Dropped extends GpuException {
        private static final long serialVersionUID = 1L;
        /** Set once the refusal is in the audit (the stop records its own before the audit closes). */
        volatile boolean audited;

        Dropped(String message) {
            super(message);
        }
    }

    /** What a request dropped because its client went says: a half-close reads as a close. */
    static final String CLIENT_WENT = "its client went away while it waited (a connection whose sending side was shut,"
            + " a half-close, counts as gone: keep it open until the answer)";

    /** A waiting request dropped because its client went away (400 CLIENT_GONE, to a client still reading). */
    static final class ClientGone extends Dropped {
        private static final long serialVersionUID = 1L;

        ClientGone(String message) {
            super(message);
        }
    }

    /** One waiting request. */
    final class Ticket {
        final long seq;
        final Caller caller;
        /**
         * Whose turn it takes: the request's owner (uid and name), which is its caller's unless an admin asked for
         * another user; turns, the per-user limit and the queue's view go by owner (review29)
         */
        final long who;
        final String whoName;
        final GpuRequest request;
        final Instant since;
        final long deadlineNanos;
        final BooleanSupplier gone;
        /** A request that does not wait: tried once, in its fair place, then served or refused. */
        final boolean now;
        final CompletableFuture<Allocation> result = new CompletableFuture<>();
        volatile GpuAllocationException lastRefusal;

        Ticket(long seq, Caller caller, GpuRequest request, Instant since, long deadlineNanos, BooleanSupplier gone,
                boolean now) {
            this.seq = seq;
            this.caller = caller;
            this.who = ownerUid(caller, request);
            this.whoName = request.owner().orElse(caller.user());
            this.request = request;
            this.since = since;
            this.deadlineNanos = deadlineNanos;
            this.gone = gone;
            this.now = now;
        }

        /** @return its place in the projected order, 1 first; 0 once it left the queue */
        int position() {
            lock.lock(); // order() walks the users' queues, which other threads change under the lock
            try {
                int i = order().indexOf(this);
                return i < 0 ? 0 : i + 1;
            } finally {
                lock.unlock();
            }
        }
    }

    /** @return the uid a request's turn is taken for: its owner's, else its caller's */
    static long ownerUid(Caller caller, GpuRequest request) {
        return request.ownerUid().orElse(caller.uid());
    }

    /** A waiting request as {@code GET /api/v1/queue} shows it (the user it is for). */
    record View(int position, String user, long uid, String request, String since) {
    }

    private final GpuScheduler scheduler;
    private final Clock clock;
    private final Consumer<Ticket> onDropped;
    private final BiConsumer<Ticket, Dropped> onStopped;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    /** Waiting requests per uid, oldest first; users in order of their first waiting request. */
    private final LinkedHashMap<Long, ArrayDeque<Ticket>> byUser = new LinkedHashMap<>();
    /**
     * Waiting requests (not those that do not wait) by the uid of the caller who made them: the per-user limit counts
     * what a caller sent, so an admin's requests for alice do not fill alice's own (review31); guarded by the lock.
     */
    private final Map<Long, Integer> sentBy = new HashMap<>();
    /** The grant counter at each uid's last grant (absent: never served). */
    private final Map<Long, Long> lastGrant = new HashMap<>();
    private long grants;
    private long seq;
    /** Tickets in {@link #byUser}, those that do not wait included. */
    private int size;
    /** Tickets in {@link #byUser} that do not wait. */
    private int nows;
    private boolean dirty;
    private boolean closed;
    /** Requests that do not wait being tried in their callers' threads ({@link #direct}); guarded by the lock. */
    private int direct;
    /** Releases handed to the dispatcher, oldest first (guarded by {@link #lock}). */
    private final ArrayDeque<HandOff> releases = new ArrayDeque<>();
    /**
     * Ids the dispatcher is releasing or released: their release events need not wake it (it decided its grants on
     * the state they left). Each leaves on its event, or after its transaction when it was not released.
     */
    private final Set<String> handedOff = ConcurrentHashMap.newKeySet();
    private final Thread dispatcher;

    /**
     * A release handed to the dispatcher; {@code done} completes with its result once it is on disk, exceptionally
     * with its refusal, or with null when the dispatcher did not take it (the caller then releases by itself).
     */
    private record HandOff(String id, CompletableFuture<Boolean> done) {
    }

    /**
     * @param onDropped told of every request dropped because its client went away or its wait ran out (the audit)
     * @param onStopped told of every request the stop refuses, with its refusal, before its caller is (the audit)
     */
    FairQueue(GpuScheduler scheduler, Clock clock, Consumer<Ticket> onDropped, BiConsumer<Ticket, Dropped> onStopped) {
        this.scheduler = scheduler;
        this.clock = clock;
        this.onDropped = onDropped;
        this.onStopped = onStopped;
        this.dispatcher = new Thread(this::run, "gpusched-fair-queue");
        this.dispatcher.setDaemon(true);
        this.dispatcher.start();
    }

    /**
     * Queues a request.
     *
     * @param gone answers true once the client has gone (the request is then dropped)
     * @return the ticket; its {@code result} completes with the allocation, or exceptionally with the refusal (a
     *         {@link GpuAllocationException}), {@link Dropped} (client gone, wait over, service stopping)
     * @throws GpuAllocationException {@code RATE_LIMITED} when the user or the queue holds too many waiting requests
     */
    Ticket enqueue(Caller caller, GpuRequest request, Duration wait, BooleanSupplier gone) {
        long now = System.nanoTime();
        long w = Math.max(0, Math.min(wait.toNanos(), TimeUnit.DAYS.toNanos(3650)));
        // never served: refused to its caller now, not by a dispatch after it (to no one, for a detached job)
        Optional<GpuAllocationException> never = neverServed(request, scheduler.inventory().devices());
        if (never.isPresent()) {
            throw never.get();
        }
        Optional<UserQuotas.Limit> limit = scheduler.quotaLimitFor(request);
        if (limit.isPresent() && request.count() > limit.get().gpus()) { // as the scheduler would refuse it, later
            throw new GpuAllocationException(Reason.INVALID_REQUEST, request.describe() + " requested by "
                    + caller.user() + "; " + request.owner().orElse(caller.user()) + " may hold at most "
                    + limit.get().gpus() + " GPU(s) at once (" + limit.get().source() + "), so this request can"
                    + " never be served: ask for " + limit.get().gpus() + " or fewer");
        }
        lock.lock();
        try {
            if (closed) {
                throw new Dropped("the node service is stopping; nothing was queued");
            }
            int sent = sentBy.getOrDefault(caller.uid(), 0);
            if (sent >= MAX_PER_USER || size >= MAX_TOTAL) {
                throw new GpuAllocationException(Reason.RATE_LIMITED, caller.user() + " has " + sent
                        + " request(s) waiting and the queue " + size + "; at most " + MAX_PER_USER + " per user and "
                        + MAX_TOTAL + " in all may wait: wait for some to be served");
            }
            Ticket t = new Ticket(++seq, caller, request, clock.instant(), now + w, gone, false);
            byUser.computeIfAbsent(t.who, k -> new ArrayDeque<>()).add(t);
            sentBy.merge(caller.uid(), 1, Integer::sum);
            size++;
            dirty = true;
            changed.signalAll();
            return t;
        } finally {
            lock.unlock();
        }
    }

    /**
     * @param devices the node's GPUs
     * @return why the node could never serve {@code r}, whatever its GPUs' holders, health or pool: more GPUs than it
     *         has ({@code NODE_TOO_SMALL}), a GPU it names that is not here ({@code UNKNOWN_DEVICE}), fewer GPUs of
     *         its vendor, model or compute capability ({@code NO_MATCHING_DEVICE}) or with its memory
     *         ({@code INSUFFICIENT_MEMORY}) than it asks; empty when it could be served some day
     */
    static Optional<GpuAllocationException> neverServed(GpuRequest r, List<GpuDevice> devices) {
        int gpus = devices.size();
        String never = ", so it can never be served here";
        if (r.count() > gpus) {
            return Optional.of(new GpuAllocationException(Reason.NODE_TOO_SMALL, r.describe() + " requested; this node"
                    + " has " + gpus + (gpus == 1 ? " GPU" : " GPUs") + " in all" + never));
        }
        Set<Integer> indices = new HashSet<>();
        Set<String> uuids = new HashSet<>();
        devices.forEach(d -> {
            indices.add(d.index());
            uuids.add(d.uuid());
        });
        List<Object> absent = new ArrayList<>();
        Stream.concat(r.deviceIndices().stream(), r.requiredDevices().stream()).filter(i -> !indices.contains(i))
                .forEach(absent::add);
        r.deviceUuids().stream().filter(u -> !uuids.contains(u)).forEach(absent::add);
        if (!absent.isEmpty()) {
            return Optional.of(new GpuAllocationException(Reason.UNKNOWN_DEVICE, r.describe() + " requested; GPU "
                    + absent.get(0) + " is not on this node" + never));
        }
        long matching = devices.stream().filter(r::matchesIdentityOf).count();
        long usable = devices.stream().filter(r::couldUse).count();
        boolean required = r.requiredDevices().stream().allMatch(i -> devices.stream().anyMatch(d -> d.index() == i
                && r.couldUse(d)));
        if (usable >= r.count() && required) {
            return Optional.empty();
        }
        if (matching < r.count() || !r.requiredDevices().stream().allMatch(i -> devices.stream().anyMatch(
                d -> d.index() == i && r.matchesIdentityOf(d)))) {
            return Optional.of(new GpuAllocationException(Reason.NO_MATCHING_DEVICE, r.describe() + " requested; "
                    + matching + " of the node's " + gpus + " GPUs match it" + never));
        }
        return Optional.of(new GpuAllocationException(Reason.INSUFFICIENT_MEMORY, r.describe() + " requested; "
                + usable + " of the node's " + gpus + " GPUs have the memory (the largest has " + devices.stream()
                        .map(GpuDevice::memory).max(MemorySize::compareTo).map(MemorySize::toHumanString).orElse("none")
                + ")" + never));
    }

    /** Takes a ticket out of the queue (its caller gave up); no effect once it was served or dropped. */
    void cancel(Ticket t, String why) {
        lock.lock();
        try {
            if (remove(t)) {
                t.result.completeExceptionally(new Dropped(why));
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Serves a request that does not wait, in its fair place among those that do: the dispatcher tries it once when
     * its turn comes (at once, in this thread, when nothing waits). A grant sends its user behind those who wait, as
     * any grant does.
     *
     * @return the allocation
     * @throws GpuAllocationException the scheduler's refusal, or {@code INSUFFICIENT_GPUS} naming the waiting request
     *                                ahead of it that does not fit yet (the GPUs free now are owed to it)
     * @throws Dropped                when the service is stopping
     */
    Allocation now(Caller caller, GpuRequest request) throws InterruptedException {
        Ticket t = null;
        lock.lock();
        try {
            if (closed) {
                throw new Dropped("the node service is stopping; nothing was allocated");
            }
            if (size == 0 && releases.isEmpty()) {
                direct++; // nothing waits, so nothing is owed: tried at once, in the caller's thread
            } else {
                t = new Ticket(++seq, caller, request, clock.instant(), Long.MAX_VALUE, () -> false, true);
                byUser.computeIfAbsent(t.who, k -> new ArrayDeque<>()).add(t);
                size++;
                nows++;
                dirty = true;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
        if (t == null) {
            return direct(caller, request);
        }
        try {
            return t.result.get(NOW_ANSWER.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            cancel(t, "its caller was interrupted");
            throw e;
        } catch (ExecutionException e) {
            throw e.getCause() instanceof RuntimeException re ? re : new GpuException(e.getMessage());
        } catch (TimeoutException e) {
            cancel(t, "the queue did not try it within " + human(NOW_ANSWER));
            if (t.result.isDone() && !t.result.isCompletedExceptionally()) {
                return t.result.join(); // granted as it timed out
            }
            throw new GpuException(request.describe() + " was not tried: the node service's queue did not come to it"
                    + " within " + human(NOW_ANSWER) + " (the ledger is busy); try again");
        }
    }

    /**
     * A request that does not wait, made when nothing waited: the same single try the dispatcher would make (a plain
     * allocation, refused as the scheduler refuses it), without the hand-over to the dispatcher's thread and back. A
     * request queued meanwhile may be tried beside it: the ledger orders the two, as it orders any two requests that
     * arrive together. {@link #close} waits for it, so nothing is granted once the close returned.
     */
    private Allocation direct(Caller caller, GpuRequest request) {
        Allocation a = null;
        try {
            a = scheduler.allocate(request);
            return a;
        } finally {
            lock.lock();
            try {
                direct--;
                if (a != null) {
                    lastGrant.put(ownerUid(caller, request), ++grants); // served: behind those who wait, as any grant
                }
                if (closed && direct == 0) {
                    changed.signalAll(); // the close waits for it; nothing else does (a grant wakes no one)
                }
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Asks the dispatcher to try again (a change on the node). While nothing waits there is nothing to try: the
     * dispatcher stays asleep (a request queued later is tried when it arrives).
     */
    void wake() {
        lock.lock();
        try {
            if (size == 0 && releases.isEmpty()) {
                return;
            }
            dirty = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Releases an allocation: while requests wait, through the dispatcher, in one transaction with the grants it makes
     * possible (the fair next requests, on the state the release leaves); otherwise at once, in the caller's thread.
     * Returns only once the release is on disk, as {@link GpuScheduler#release} does, with the same answers.
     *
     * @return whether it was live and is now released (false: released before)
     * @throws io.gpusched.core.GpuAllocationException the release's refusal ({@code UNKNOWN_ALLOCATION},
     *                                                  {@code JOB_RUNNING}); nothing was released
     * @throws io.gpusched.core.LedgerException         if the node ledger cannot record it (nothing was released)
     */
    boolean release(String id) {
        HandOff h = null;
        lock.lock();
        try {
            if (!closed && size > 0) {
                h = new HandOff(id, new CompletableFuture<>());
                releases.add(h);
                handedOff.add(id);
                dirty = true;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
        if (h == null) {
            return scheduler.release(id);
        }
        Boolean r;
        try {
            r = h.done.join(); // not interruptible: the release is made (or refused) whatever the caller does
        } catch (CompletionException e) {
            throw e.getCause() instanceof RuntimeException re ? re : e;
        }
        return r != null ? r : scheduler.release(id);
    }

    /**
     * @return whether {@code id}'s release was made by the dispatcher, so its event needs no wake (the grants were
     *         decided on the state it left); forgets the id
     */
    boolean releasedHere(String id) {
        return handedOff.remove(id);
    }

    /** Caller holds the lock. @return the releases handed over so far, which the caller must complete */
    private List<HandOff> takeReleases() {
        if (releases.isEmpty()) {
            return List.of();
        }
        List<HandOff> out = new ArrayList<>(releases);
        releases.clear();
        return out;
    }

    /** Completes the releases of a hand-off transaction (or fails them all with its error). */
    private void complete(List<HandOff> taken, ReleasesAndGrants done, RuntimeException failed) {
        for (int i = 0; i < taken.size(); i++) {
            HandOff h = taken.get(i);
            if (failed != null) {
                handedOff.remove(h.id);
                h.done.completeExceptionally(failed);
                continue;
            }
            ReleasesAndGrants.Release r = done.releases().get(i);
            if (!r.released()) {
                handedOff.remove(h.id);
            }
            if (r.refused().isPresent()) {
                h.done.completeExceptionally(r.refused().get());
            } else {
                h.done.complete(r.released());
            }
        }
    }

    /** @return the waiting requests in the order they would be served if each fitted as it came up */
    List<View> views() {
        lock.lock();
        try {
            List<Ticket> order = order();
            List<View> out = new ArrayList<>(order.size());
            for (int i = 0; i < order.size(); i++) {
                Ticket t = order.get(i);
                out.add(new View(i + 1, t.whoName, t.who, t.request.describe(), t.since.toString()));
            }
            return out;
        } finally {
            lock.unlock();
        }
    }

    /** @return how many requests wait (those that do not wait, being tried, are not counted) */
    int size() {
        lock.lock();
        try {
            return size - nows;
        } finally {
            lock.unlock();
        }
    }

    /** Caller holds the lock. @return every waiting ticket in projected serving order (not those that do not wait) */
    private List<Ticket> order() {
        return projected(false, Integer.MAX_VALUE);
    }

    /**
     * Caller holds the lock.
     *
     * @param withNow whether requests that do not wait are listed (in their place) too
     * @param max     the most tickets listed
     * @return the tickets in the order they would be served if each fitted as it came up: the order in which the
     *         dispatcher, granting one at a time, would try them (each grant sends its user behind the others)
     */
    private List<Ticket> projected(boolean withNow, int max) {
        Map<Long, Long> last = new HashMap<>(lastGrant);
        Map<Long, ArrayDeque<Ticket>> left = new LinkedHashMap<>();
        byUser.forEach((u, q) -> left.put(u, new ArrayDeque<>(q)));
        List<Ticket> out = new ArrayList<>(Math.min(size, max));
        long g = grants;
        while (!left.isEmpty() && out.size() < max) {
            long u = next(left, last);
            ArrayDeque<Ticket> q = left.get(u);
            Ticket t = q.poll();
            if (withNow || !t.now) {
                out.add(t);
            }
            last.put(u, ++g);
            if (q.isEmpty()) {
                left.remove(u);
            }
        }
        return out;
    }

    /** @return the uid served next: the least recently served, ties to the oldest waiting request */
    private static long next(Map<Long, ArrayDeque<Ticket>> queues, Map<Long, Long> last) {
        return queues.entrySet().stream().min(Comparator.<Map.Entry<Long, ArrayDeque<Ticket>>>comparingLong(
                e -> last.getOrDefault(e.getKey(), 0L)).thenComparingLong(e -> e.getValue().peek().seq)).get()
                .getKey();
    }

    /** Caller holds the lock. @return whether the ticket was still waiting */
    private boolean remove(Ticket t) {
        ArrayDeque<Ticket> q = byUser.get(t.who);
        if (q == null || !q.remove(t)) {
            return false;
        }
        size--;
        if (t.now) {
            nows--;
        } else {
            sentBy.computeIfPresent(t.caller.uid(), (k, n) -> n > 1 ? n - 1 : null);
        }
        if (q.isEmpty()) {
            byUser.remove(t.who);
        }
        return true;
    }

    private void run() {
        while (true) {
            boolean tick = false;
            lock.lock();
            try {
                while (!closed && !dirty && releases.isEmpty()) {
                    if (size == 0) {
                        changed.await();
                    } else if (!changed.await(TICK.toMillis(), TimeUnit.MILLISECONDS)) {
                        tick = true;
                        break;
                    }
                }
                if (closed) {
                    return;
                }
                tick &= !dirty && releases.isEmpty(); // releases handed over are made in a pass, never left
                dirty = false;
            } catch (InterruptedException e) {
                return;
            } finally {
                lock.unlock();
            }
            try {
                sweep();
            } catch (RuntimeException e) {
                LOG.warn("the fair queue's sweep failed (it tries again on the next pass): {}", e.toString());
            }
            try {
                if (tick) {
                    // other processes' changes: their events reach the service's listener, which wakes us
                    scheduler.refresh();
                } else {
                    dispatch();
                }
            } catch (RuntimeException e) {
                LOG.warn("the fair queue's dispatch failed (it tries again on the next change): {}", e.toString());
            }
        }
    }

    /** Drops requests whose client has gone or whose wait is over. */
    private void sweep() {
        List<Ticket> all = new ArrayList<>();
        lock.lock();
        try {
            byUser.values().forEach(all::addAll);
        } finally {
            lock.unlock();
        }
        long now = System.nanoTime();
        for (Ticket t : all) {
            if (t.now) {
                continue; // answered by the dispatch that follows
            }
            boolean gone;
            try {
                gone = t.gone.getAsBoolean();
            } catch (RuntimeException e) {
                gone = true;
            }
            RuntimeException why;
            if (gone) {
                why = new ClientGone(CLIENT_WENT);
            } else if (now - t.deadlineNanos >= 0) {
                GpuAllocationException last = t.lastRefusal;
                why = new GpuAllocationException(last != null ? last.reason() : Reason.INSUFFICIENT_GPUS,
                        (last != null ? last.getMessage() : t.request.describe() + " requested") + "; gave up after"
                                + " waiting " + human(Duration.between(t.since, clock.instant()))
                                + " in the node service's queue");
            } else {
                continue;
            }
            boolean dropped;
            lock.lock();
            try {
                dropped = remove(t);
            } finally {
                lock.unlock();
            }
            if (dropped) {
                t.result.completeExceptionally(why);
                onDropped.accept(t);
            }
        }
    }

    private static String human(Duration d) {
        long s = d.toSeconds();
        return s >= 60 ? (s / 60) + " min " + (s % 60) + " s" : d.toMillis() + " ms";
    }

    /**
     * Grants in fair order until the next request does not fit; then refuses every request that does not wait and was
     * not reached. Only this thread grants from the queue.
     *
     * <p>The fair next request and those that would follow it (the projected order, at most {@link #BATCH}) are tried
     * in one {@link GpuScheduler#releaseEachThenAllocateInOrder} transaction, with the releases handed over since the
     * last one: granted in that order up to the first that does not fit, with one forced write for all of them. That
     * is the order granting one at a time would follow (each grant sends its user behind the others), so nobody is
     * served ahead of their turn. When the first request not granted is a waiting one that does not fit now, it is
     * the next fair head, and nothing is tried ahead of it: the pass ends without another transaction (a later
     * release or change wakes the dispatcher again). Any other refusal after the first grant is tried again by
     * itself, as the next fair head, in the next pass.
     */
    private void dispatch() {
        while (true) {
            List<Ticket> heads;
            List<Ticket> batch;
            List<Ticket> nowSeen = new ArrayList<>();
            List<HandOff> taken;
            lock.lock();
            try {
                if (closed) {
                    return; // close() answers what still waits, and the releases not taken
                }
                taken = takeReleases();
                if (size == 0) {
                    heads = List.of();
                    batch = List.of();
                } else {
                    Map<Long, ArrayDeque<Ticket>> copy = new LinkedHashMap<>(byUser);
                    Map<Long, Long> last = new HashMap<>(lastGrant);
                    heads = new ArrayList<>();
                    while (!copy.isEmpty()) {
                        long u = next(copy, last);
                        heads.add(copy.remove(u).peek());
                    }
                    batch = projected(true, BATCH);
                    byUser.values().forEach(q -> q.stream().filter(t -> t.now).forEach(nowSeen::add));
                }
            } finally {
                lock.unlock();
            }
            if (heads.isEmpty()) {
                if (!taken.isEmpty()) {
                    handOff(taken, List.of(), Set.of()); // nobody waits any more: the releases alone
                }
                return;
            }
            if (batch.get(0) != heads.get(0)) { // the same rule under the same lock: cannot differ
                complete(taken, null, new IllegalStateException("not released: the fair queue's dispatch failed"));
                throw new IllegalStateException("the fair queue's projected order does not start with its fair head");
            }
            boolean progressed = false;
            Ticket blocker = null;
            // the GPUs the waiting requests that do not fit could use: no request after them in fair order takes one
            // (a large request is never starved by small ones), but those they could never use go to whoever is next
            Kept withheld = new Kept();
            for (int i = 0; i < heads.size(); i++) {
                Ticket t = heads.get(i);
                List<Ticket> tried = i == 0 ? batch : List.of(t);
                List<Allocation> a;
                RuntimeException refusal;
                try {
                    ReleasesAndGrants done = handOff(i == 0 ? taken : List.of(), tried, withheld.gpus);
                    a = done.grants();
                    refusal = done.refusal().orElse(null);
                } catch (UnsupportedOperationException cannotWithhold) {
                    break; // a scheduler that cannot withhold GPUs: nothing is served after the first that waits
                } catch (RuntimeException e) {
                    finish(t, null, e);
                    progressed = true;
                    break;
                }
                if (a.isEmpty()) {
                    if (refusal instanceof GpuAllocationException e) {
                        t.lastRefusal = owedOr(t, e, withheld, heads);
                        if (!t.now && (e.reason() == Reason.QUOTA_EXCEEDED || e.reason() == Reason.RATE_LIMITED)) {
                            continue; // this user cannot be served now whatever is free: the next user may
                        }
                        if (e.reason().isTransient() && (!t.now || blocker != null)) {
                            if (!t.now) { // it does not fit yet: what it could use is kept for it
                                blocker = blocker == null ? t : blocker;
                                withheld.add(t, keptFor(t), order(0, i));
                            } // one that does not wait, short of what is kept for one ahead: refuseUnreached says so
                            continue;
                        }
                    }
                    finish(t, null, refusal);
                    progressed = true;
                    break;
                }
                for (int k = 0; k < a.size(); k++) {
                    finish(tried.get(k), a.get(k), null);
                }
                Ticket stopped = a.size() < tried.size() ? tried.get(a.size()) : null;
                if (stopped != null && refusal instanceof GpuAllocationException e) {
                    stopped.lastRefusal = e; // the next pass tries it first if it is the fair next
                }
                progressed = true;
                break;
            }
            if (!progressed) {
                boolean more;
                lock.lock();
                try {
                    more = !releases.isEmpty();
                } finally {
                    lock.unlock();
                }
                if (more) {
                    continue; // releases came meanwhile: the blocker may fit now
                }
                if (backfillBehind(heads, withheld)) {
                    continue; // one was served: the next pass starts from the fair order again
                }
                refuseUnreached(nowSeen, heads, withheld);
                return;
            }
        }
    }

    /**
     * The GPUs kept for waiting requests that do not fit, in fair order, with the request each was kept for first: a
     * request refused for want of them is told the one it waits behind, a request that could use its GPU.
     */
    private static final class Kept {
        final Set<Integer> gpus = new HashSet<>();
        private final Map<Ticket, Set<Integer>> by = new LinkedHashMap<>();
        /** per request kept for: its place in the queue's fair order ({@link #order}) */
        private final Map<Ticket, Long> at = new HashMap<>();

        void add(Ticket t, Set<Integer> kept, long order) {
            if (!kept.isEmpty()) {
                gpus.addAll(kept);
                by.computeIfAbsent(t, x -> new HashSet<>()).addAll(kept);
                at.putIfAbsent(t, order);
            }
        }

        /** Adds what {@code other} kept for requests ahead of {@code order} in fair order. */
        void addAhead(Kept other, long order) {
            other.by.forEach((t, g) -> {
                long o = other.at.get(t);
                if (o < order) {
                    add(t, g, o);
                }
            });
        }

        /** @return the first request something of {@code usable} was kept for, other than {@code self}; null: none */
        Ticket keeperOf(Set<Integer> usable, Ticket self) {
            for (Map.Entry<Ticket, Set<Integer>> e : by.entrySet()) {
                if (e.getKey() != self && e.getValue().stream().anyMatch(usable::contains)) {
                    return e.getKey();
                }
            }
            return null;
        }
    }

    /**
     * @return the first request (in fair order) that a GPU {@code t} could be given now was kept for; null when none
     *         is, or when {@code t} would not be served even if nothing were kept (too few GPUs it could use are free:
     *         a busy GPU kept for another is not what it lacks; review24)
     */
    private Ticket keeperDepriving(Ticket t, Kept kept) {
        Set<Integer> free = freeFor(t);
        if (free.size() < t.request.count() || !free.containsAll(t.request.requiredDevices())) {
            return null; // too few free, or a GPU it must be given is busy: not what the queue keeps (review27)
        }
        free.retainAll(kept.gpus);
        return free.isEmpty() ? null : kept.keeperOf(free, t);
    }

    /**
     * @return a request's place in the queue's fair order: its user's {@code round}-th request (0: the user's first),
     *         its user {@code user}-th among the users in fair order; every user's first comes before any second
     */
    private static long order(int round, int user) {
        return ((long) round << 32) | user;
    }

    /**
     * @return the indices of the GPUs {@code t} could be given now if nothing were kept for anyone: usable by it,
     *         allocatable, and free (for a shared request: not held exclusively and with its memory left)
     */
    private Set<Integer> freeFor(Ticket t) {
        Set<Integer> use = usable(t);
        Set<Integer> out = new HashSet<>();
        long wants = t.request.sharedMemory().map(MemorySize::bytes).orElse(0L);
        int slots = scheduler.maxSharedPerGpu();
        try {
            for (DeviceState d : scheduler.devices()) {
                boolean free = t.request.sharing() == SharingMode.EXCLUSIVE ? d.isIdle()
                        : d.exclusiveHolder().isEmpty() && d.reservableMemory().bytes() >= wants
                                && (slots <= 0 || d.sharedHolders() < slots); // a share left (review26)
                if (use.contains(d.index()) && d.isAllocatable() && free) {
                    out.add(d.index());
                }
            }
        } catch (RuntimeException e) {
            return use; // the node's state unread: as if all were free
        }
        return out;
    }

    /**
     * @return the GPUs kept for a waiting request that does not fit: every one it could use, unless it could not be
     *         served even if every other user's allocation ended, because it waits on its own user (the GPUs its user
     *         holds: any, for an exclusive request; held exclusively, or shared by its user to the point of too
     *         little memory or no share left (gpu.max_shared_per_gpu), for a shared one) or on an admin or the health
     *         checks (GPUs drained by an admin, quarantined or unhealthy): then none, so that one user holding a GPU
     *         and asking for the whole node, or asking for a drained GPU's count, keeps nothing from anyone
     */
    private Set<Integer> keptFor(Ticket t) {
        Set<Integer> use = usable(t);
        try {
            Set<Integer> own = new HashSet<>();
            Map<Integer, Long> ownReserved = new HashMap<>(); // bytes its user's shared allocations reserve, by GPU
            Map<Integer, Integer> ownShares = new HashMap<>(); // how many of a GPU's shares its user holds
            for (Allocation a : scheduler.allocations()) {
                if (!t.request.sameOwnerAs(a.request())) {
                    continue;
                }
                if (t.request.sharing() == SharingMode.EXCLUSIVE || a.request().sharing() == SharingMode.EXCLUSIVE) {
                    own.addAll(a.deviceIndices());
                } else {
                    long bytes = a.request().sharedMemory().map(MemorySize::bytes).orElse(0L);
                    a.deviceIndices().forEach(i -> ownReserved.merge(i, bytes, Long::sum));
                    a.deviceIndices().forEach(i -> ownShares.merge(i, 1, Integer::sum));
                }
            }
            OptionalInt quota = scheduler.quotaFor(t.request);
            if (quota.isPresent() && ownHeld(t) + t.request.count() > quota.getAsInt()) {
                return new HashSet<>(); // over its user's quota: it cannot be served now, whatever is free (review24)
            }
            long wants = t.request.sharedMemory().map(MemorySize::bytes).orElse(0L);
            int slots = scheduler.maxSharedPerGpu();
            List<Integer> required = t.request.requiredDevices();
            int could = 0;
            int requiredCould = 0;
            for (DeviceState d : scheduler.devices()) {
                // a shared request on its own user's reservations: room only if theirs leave enough memory, and a
                // share of the GPU (gpu.max_shared_per_gpu) not all theirs
                long left = d.device().memory().bytes() - ownReserved.getOrDefault(d.index(), 0L);
                boolean room = wants == 0 || left >= wants;
                room &= t.request.sharing() == SharingMode.EXCLUSIVE || slots <= 0
                        || ownShares.getOrDefault(d.index(), 0) < slots;
                if (use.contains(d.index()) && !own.contains(d.index()) && room && d.health().isHealthy()
                        && (d.pool() == DeviceState.Pool.IN_POOL || d.pool() == DeviceState.Pool.DRAINING)) {
                    could++;
                    if (required.contains(d.index())) {
                        requiredCould++;
                    }
                }
            }
            if (could < t.request.count() || requiredCould < required.size()) {
                return new HashSet<>(); // a GPU it must have is its own user's, drained or ailing (review26)
            }
            if (required.size() >= t.request.count()) { // it can only ever be given the GPUs it must have
                use.retainAll(required);
            }
            return use;
        } catch (RuntimeException e) {
            return use; // the node's state unread: kept, as before
        }
    }

    /**
     * Tries each user's waiting requests after their first, in the queue's fair order (every user's second, users in
     * fair order, then every user's third, ...; at most {@link #PER_USER_BACKFILL} of each user's and {@link #BATCH}
     * in all a pass) on the GPUs kept for no waiting request ahead of them (their own user's earlier ones included): a
     * user whose first request waits for a busy GPU is served another that nobody waits for, as anyone else would be.
     * A request over its user's quota keeps nothing; a smaller one after it is still tried.
     *
     * @return whether one was served or refused (the queue changed: the next pass starts again)
     */
    private boolean backfillBehind(List<Ticket> heads, Kept withheld) {
        // each user's later waiting requests, the users in fair order (that of their first requests)
        List<List<Ticket>> laterOf = new ArrayList<>();
        List<Integer> userAt = new ArrayList<>(); // each list's user's place among the heads
        Map<Ticket, GpuAllocationException> paced = new LinkedHashMap<>(); // later requests of rate-limited users
        for (int i = 0; i < heads.size(); i++) {
            Ticket h = heads.get(i);
            boolean rateLimited = h.lastRefusal != null && h.lastRefusal.reason() == Reason.RATE_LIMITED;
            lock.lock();
            try {
                ArrayDeque<Ticket> q = byUser.get(h.who);
                if (q != null && q.peek() == h) {
                    List<Ticket> later = q.stream().skip(1).filter(t -> !t.now).toList();
                    if (rateLimited) {
                        for (Ticket t : later) { // the user's rate: none of theirs can be served now
                            paced.put(t, h.lastRefusal);
                        }
                    } else {
                        laterOf.add(later);
                        userAt.add(i);
                    }
                }
            } finally {
                lock.unlock();
            }
        }
        Map<Long, Integer> held = new HashMap<>(); // GPUs each owner holds, counted once a pass (ownHeld)
        for (Map.Entry<Ticket, GpuAllocationException> p : paced.entrySet()) {
            // not tried, but what their waits would end with is kept true: over the quota (review35), else the rate
            // their first request met (review37: they timed out INSUFFICIENT_GPUS on a node with GPUs free)
            Ticket t = p.getKey();
            if (!overQuota(t, held)) {
                t.lastRefusal = p.getValue();
            }
        }
        // tried in the fair order of the queue itself: every user's second request, then every user's third, ...,
        // at most PER_USER_BACKFILL of each user's and BATCH in all a pass (one user's backlog cannot use them all),
        // so that no later request keeps GPUs from one ahead of it. A request just like one this pass tried and found
        // short of GPUs (the same GPUs it could use, count, GPUs it must include, sharing and memory) is not tried
        // again, and does not count: a backlog of requests for one busy GPU cannot keep a request for any GPU behind
        // it from being tried (review24); what it could use is still kept for it
        int tries = 0;
        int[] mine = new int[laterOf.size()];
        boolean[] limited = new boolean[laterOf.size()]; // users whose later requests met their rate limit this pass
        Set<List<Object>> shortOf = new HashSet<>();
        int rounds = laterOf.stream().mapToInt(List::size).max().orElse(0);
        for (int round = 0; round < rounds; round++) {
            for (int u = 0; u < laterOf.size(); u++) {
                List<Ticket> later = laterOf.get(u);
                if (round >= later.size() || limited[u]) {
                    continue;
                }
                Ticket t = later.get(round);
                long order = order(round + 1, userAt.get(u));
                if (overQuota(t, held)) {
                    // over its user's quota: refused by the scheduler whatever is free, so not tried, not counted,
                    // nothing kept (review29: over-quota backlogs filled the caps)
                    continue;
                }
                if (t.lastRefusal != null && t.lastRefusal.reason() == Reason.RATE_LIMITED) {
                    t.lastRefusal = null; // its user's first request is past the rate now: no longer true
                }
                List<Object> shape = List.of(usable(t), t.request.count(), t.request.sharing(),
                        t.request.sharedMemory(), t.request.requiredDevices());
                if (shortOf.contains(shape)) {
                    withheld.add(t, keptFor(t), order);
                    continue;
                }
                Set<Integer> open = freeFor(t);
                open.removeAll(withheld.gpus);
                if (open.size() < t.request.count() || !open.containsAll(t.request.requiredDevices())) {
                    // too few GPUs it could use are free and kept for no one ahead, or one it must include is not:
                    // it cannot fit, whatever the scheduler's placement, so it is not tried and does not count
                    // against the caps (review27: eight or 64 distinct requests for a busy GPU stalled those behind)
                    withheld.add(t, keptFor(t), order);
                    continue;
                }
                if (mine[u] >= PER_USER_BACKFILL) {
                    continue;
                }
                mine[u]++;
                if (++tries > BATCH) {
                    return false;
                }
                ReleasesAndGrants done;
                try {
                    done = handOff(List.of(), List.of(t), withheld.gpus);
                } catch (UnsupportedOperationException cannotWithhold) {
                    return false;
                } catch (RuntimeException e) {
                    finish(t, null, e);
                    return true;
                }
                if (!done.grants().isEmpty()) {
                    finish(t, done.grants().get(0), null);
                    return true;
                }
                if (done.refusal().orElse(null) instanceof GpuAllocationException e) {
                    t.lastRefusal = owedOr(t, e, withheld, heads);
                    if (!e.reason().isTransient()) {
                        finish(t, null, e);
                        return true;
                    }
                    if (e.reason() == Reason.RATE_LIMITED) {
                        limited[u] = true; // nor are the user's later ones served now
                        continue;
                    }
                    if (e.reason() == Reason.QUOTA_EXCEEDED) {
                        continue; // over its user's quota: nothing is kept for it (a smaller later one may fit)
                    }
                    shortOf.add(shape);
                }
                withheld.add(t, keptFor(t), order); // nothing it could use goes to a request after it
            }
        }
        return false;
    }

    /**
     * Whether a later waiting request is over its user's quota now, kept in its last refusal: its wait, if it runs
     * out, ends with the quota's refusal naming the limit and its source, on a full node too (reviews 31, 32), and a
     * quota reason it no longer meets (its user released) is dropped (review32), whether or not it is tried.
     *
     * @param held GPUs each owner holds, counted once a pass
     */
    private boolean overQuota(Ticket t, Map<Long, Integer> held) {
        Optional<UserQuotas.Limit> quota = scheduler.quotaLimitFor(t.request);
        int has = quota.isPresent() ? held.computeIfAbsent(t.who, k -> ownHeld(t)) : 0;
        if (quota.isPresent() && has + t.request.count() > quota.get().gpus()) {
            t.lastRefusal = new GpuAllocationException(Reason.QUOTA_EXCEEDED, t.request.describe() + " requested for "
                    + t.whoName + ", who holds " + has + " GPU(s) already; the limit is " + quota.get().gpus()
                    + " GPU(s) per user (" + quota.get().source() + "): it is served once " + t.whoName
                    + " has released enough");
            return true;
        }
        if (t.lastRefusal != null && t.lastRefusal.reason() == Reason.QUOTA_EXCEEDED) {
            t.lastRefusal = null; // within its quota now: that reason is no longer true
        }
        return false;
    }

    /**
     * @return how many GPUs {@code t}'s user holds now, counted as the scheduler's quota counts them (its uid, or its
     *         name where an allocation has no uid: review27)
     */
    private int ownHeld(Ticket t) {
        int n = 0;
        for (Allocation a : scheduler.allocations()) {
            if (t.request.sameOwnerAs(a.request())) {
                n += a.deviceIndices().size();
            }
        }
        return n;
    }

    /** @return the indices of the node's GPUs {@code t} could ever be given (its named GPUs, model, memory, ...) */
    private Set<Integer> usable(Ticket t) {
        Set<Integer> out = new HashSet<>();
        for (GpuDevice d : scheduler.inventory().devices()) {
            if (t.request.couldUse(d)) {
                out.add(d.index());
            }
        }
        return out;
    }

    /**
     * One transaction: the releases handed over, then the requests of {@code tried} in order; completes the releases.
     *
     * @throws RuntimeException when the transaction failed (the releases were failed with it)
     */
    private ReleasesAndGrants handOff(List<HandOff> taken, List<Ticket> tried, Set<Integer> withheld) {
        ReleasesAndGrants done;
        try {
            done = scheduler.releaseEachThenAllocateInOrder(taken.stream().map(HandOff::id).toList(),
                    tried.stream().map(x -> x.request).toList(), withheld);
        } catch (RuntimeException e) {
            complete(taken, null, e);
            throw e;
        } catch (Error e) {
            for (HandOff h : taken) { // not taken after all: each caller releases by itself
                handedOff.remove(h.id);
                h.done.complete(null);
            }
            throw e;
        }
        complete(taken, done, null);
        return done;
    }

    /**
     * Tries, then refuses, the requests that do not wait and were not reached in this pass (each behind its own user's
     * earlier waiting request, or short of what is kept for a waiting request ahead, {@code blocker}): each is tried on
     * the GPUs that neither the waiting requests that did not fit ({@code withheld}) nor its own user's earlier waiting
     * requests could use, and refused, naming the request ahead of it, when that is not enough.
     */
    private void refuseUnreached(List<Ticket> nowSeen, List<Ticket> heads, Kept withheld) {
        for (Ticket n : nowSeen) {
            Kept kept = new Kept();
            long order;
            lock.lock();
            try {
                ArrayDeque<Ticket> mine = byUser.get(n.who);
                if (mine == null || !mine.contains(n)) {
                    continue; // served or refused already
                }
                // its place in fair order: its user's round (requests of the user before it), its user's place
                int round = (int) mine.stream().filter(t -> t.seq < n.seq).count();
                int user = 0;
                while (user < heads.size() && heads.get(user).who != n.who) {
                    user++;
                }
                order = order(round, user);
                // its own user's earlier waiting requests come first: ahead of it in its user's order
                mine.stream().filter(t -> !t.now && t.seq < n.seq).forEach(t -> kept.add(t, keptFor(t), -1));
            } finally {
                lock.unlock();
            }
            kept.addAhead(withheld, order); // what is kept for requests after it in fair order is not kept from it
            List<Allocation> got = List.of();
            RuntimeException refusal = null;
            try {
                ReleasesAndGrants done = handOff(List.of(), List.of(n), kept.gpus);
                got = done.grants();
                refusal = done.refusal().orElse(null);
            } catch (UnsupportedOperationException cannotWithhold) {
                // refused below, as when nothing is tried around a waiting request
            } catch (RuntimeException e) {
                finish(n, null, e);
                continue;
            }
            if (!got.isEmpty()) {
                finish(n, got.get(0), null);
                continue;
            }
            Ticket ahead = keeperDepriving(n, kept);
            if (refusal instanceof GpuAllocationException e && (!e.reason().isTransient()
                    || e.reason() == Reason.QUOTA_EXCEEDED || e.reason() == Reason.RATE_LIMITED
                    || ahead == null)) {
                finish(n, null, e); // its own refusal: nothing kept for others would change it
                continue;
            }
            finish(n, null, owed(n, ahead, heads));
        }
    }

    /**
     * @return the refusal of a request short of GPUs kept for {@code ahead}: the queue's sentence naming who waits for
     *         what, since when (the scheduler's, tried with those GPUs withheld, would call them draining)
     */
    private GpuAllocationException owed(Ticket n, Ticket ahead, List<Ticket> heads) {
        lock.lock();
        try {
            long waiting = waitingAhead(n, heads);
            return new GpuAllocationException(Reason.INSUFFICIENT_GPUS, n.request.describe() + " was not served:"
                    + " the GPUs free now are owed to the node service's queue, where " + (ahead == null
                            ? waiting + " request(s) wait"
                            : ahead.whoName + " (uid " + ahead.who + ") waits for "
                                    + ahead.request.describe() + " since " + ahead.since + ", one of " + waiting
                                    + " waiting, ahead of it") // ahead in fair order, not all that wait (review27)
                    + " (GET /api/v1/queue lists them); no GPU a waiting request ahead could use is served"
                    + " around it: ask with a wait (--wait DURATION) to queue fairly behind it");
        } finally {
            lock.unlock();
        }
    }

    /**
     * @return {@code e}, or the queue's sentence when it is transient and GPUs {@code t} could use were withheld,
     *         naming the first request (in fair order) they were kept for
     */
    private GpuAllocationException owedOr(Ticket t, GpuAllocationException e, Kept withheld, List<Ticket> heads) {
        if (!e.reason().isTransient() || e.reason() == Reason.QUOTA_EXCEEDED || e.reason() == Reason.RATE_LIMITED
                || withheld.gpus.isEmpty()) {
            return e;
        }
        Ticket ahead = keeperDepriving(t, withheld);
        return ahead == null ? e : owed(t, ahead, heads);
    }

    /**
     * Caller holds the lock.
     *
     * @param heads the users' first requests in fair order (the pass's)
     * @return how many waiting requests come before {@code n} in the queue's fair order: every user's k-th request
     *         before any user's (k+1)-th, users in {@code heads}' order within a round
     */
    private long waitingAhead(Ticket n, List<Ticket> heads) {
        Map<Long, Integer> place = new HashMap<>();
        for (int i = 0; i < heads.size(); i++) {
            place.putIfAbsent(heads.get(i).who, i);
        }
        ArrayDeque<Ticket> mine = byUser.get(n.who);
        int round = mine == null ? 0 : (int) mine.stream().filter(t -> t.seq < n.seq).count();
        int user = place.getOrDefault(n.who, heads.size());
        long ahead = 0;
        for (Map.Entry<Long, ArrayDeque<Ticket>> e : byUser.entrySet()) {
            int at = place.getOrDefault(e.getKey(), heads.size());
            int k = 0;
            for (Ticket t : e.getValue()) {
                if (t != n && !t.now && (k < round || k == round && at < user)) {
                    ahead++;
                }
                k++;
            }
        }
        return ahead;
    }

    private void finish(Ticket t, Allocation a, RuntimeException refusal) {
        boolean waiting;
        lock.lock();
        try {
            waiting = remove(t);
            if (a != null) {
                lastGrant.put(t.who, ++grants);
            }
        } finally {
            lock.unlock();
        }
        if (a == null) {
            if (waiting) {
                t.result.completeExceptionally(refusal);
            }
            return;
        }
        if (!waiting || !t.result.complete(a)) {
            try { // its client gave up meanwhile: the GPUs go back at once
                scheduler.release(a.id());
            } catch (RuntimeException e) {
                LOG.warn("releasing {} (its waiter had gone) failed: {}", a.id(), e.toString());
            }
        }
    }

    /** @return whether this thread was interrupted while it waited (up to {@code d}) for {@code t} to end */
    private static boolean joinUninterruptibly(Thread t, Duration d) {
        boolean interrupted = false;
        long until = System.nanoTime() + d.toNanos();
        while (t.isAlive() && until - System.nanoTime() > 0) {
            try {
                t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime())));
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        return interrupted;
    }

    /**
     * Stops the dispatcher, then drops every request still waiting ({@link Dropped}: the service is stopping). A
     * transaction the dispatcher had begun ends first and its grants are answered to their callers: nothing is granted
     * or released by the queue once this returns (the scheduler may be closed next).
     */
    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        if (Thread.currentThread() != dispatcher) {
            // it ends after the transaction it is in, if any; waited for through an interrupt of this thread (then
            // re-asserted), so that nothing is granted or released by the queue once this returns
            boolean interrupted = joinUninterruptibly(dispatcher, STOP_WAIT);
            if (dispatcher.isAlive()) {
                LOG.warn("the fair queue's dispatcher did not end within {} (a ledger write stuck?); interrupting it",
                        STOP_WAIT);
                dispatcher.interrupt();
                interrupted |= joinUninterruptibly(dispatcher, STOP_WAIT);
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        List<Ticket> all = new ArrayList<>();
        lock.lock();
        try {
            long until = System.nanoTime() + STOP_WAIT.toNanos();
            boolean interrupted = false;
            while (direct > 0 && until - System.nanoTime() > 0) { // a grant made as the close came ends first
                try {
                    changed.awaitNanos(until - System.nanoTime());
                } catch (InterruptedException e) {
                    interrupted = true; // still waited for: the close's promise holds for what it returns to
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (direct > 0) {
                LOG.warn("{} allocation(s) made outside the fair queue's thread were still under way after {}",
                        direct, STOP_WAIT);
            }
            byUser.values().forEach(all::addAll);
            byUser.clear();
            sentBy.clear();
            size = 0;
            for (HandOff h : takeReleases()) { // not taken: each caller releases by itself
                handedOff.remove(h.id);
                h.done.complete(null);
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        for (Ticket t : all) {
            Dropped d = new Dropped("the node service is stopping; the request was not served");
            try {
                onStopped.accept(t, d); // recorded now, while the audit is open: its caller wakes after it closed
            } catch (RuntimeException e) {
                LOG.warn("recording the stop's refusal of a waiting request failed: {}", e.toString());
            }
            t.result.completeExceptionally(d);
        }
    }
}
