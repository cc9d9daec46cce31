package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import io.gpusched.accounting.IdleNotice;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuSample;
import io.gpusched.core.GpuScheduler;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Watches the node for the console: on each tick it samples the inventory into the scheduler, catches up with
 * other processes' changes to the node ledger, appends one point per GPU to a ten-minute {@link SampleHistory}, and
 * pushes what changed to the event stream: {@code tick} (the new points), {@code delta} (the devices and allocations
 * that changed since the last push: {@code {"devices": [device views], "allocations": {"upsert": [allocation views],
 * "remove": [ids]}}}, each item whole, so applying a delta twice, or to a state newer than the one it was computed
 * from, gives the same result) and {@code audit} (each allocation event). A client's stream starts with one
 * {@code state} event, the whole state ({@link #subscribe}); the page applies the deltas to it. (Before, each change
 * re-sent the whole state to every client: 300 shared allocations with 10 KB owners made each such event 28.5 MB.)
 */
final class NodeWatcher {
    private static final Logger LOG = LoggerFactory.getLogger(NodeWatcher.class);
    /**
     * Most bytes (UTF-8 JSON) of allocations a {@code state} event carries; the rest are named by its
     * {@code truncated} marker and read from {@code GET /api/v1/allocations?after=ID&limit=M}. Under the event
     * stream's queue bound ({@link SseHub#MAX_QUEUED_BYTES}), so a client that opens a stream is not dropped for the
     * size of its first event.
     */
    static final int MAX_STATE_ALLOCATION_BYTES = 128 * 1024;
    /**
     * Most bytes (UTF-8 JSON) one {@code delta} event carries; a larger change set is split into several (an item
     * larger than this goes alone). Pushes are coalesced ({@link #pushSoon}), so one change set may hold many changes:
     * this keeps each event about as small as one change's.
     */
    static final int MAX_DELTA_BYTES = 4 * 1024;
    /** room left in a client's queue for ticks and heartbeats when pacing deltas */
    private static final int QUEUE_MARGIN_BYTES = 32 * 1024;
    /** the delta's own keys and the frame's lines, over its items */
    private static final int DELTA_FRAMING_BYTES = 256;
    /** how long changes wait for room in the fullest client's queue before they go anyway */
    static final long MAX_PACING_MILLIS = 2_000;
    private static final long PACING_STEP_MILLIS = 10;

    private final GpuScheduler scheduler;
    private final GpuInventory inventory;
    private final Runnable refresh;
    private final SseHub sse;
    private final Clock clock;
    private final SampleHistory history;
    private final Deque<Map<String, Object>> audit = new ArrayDeque<>();
    /** what the last push left each client with: device views (without holders) by index, allocation views by id */
    private Map<Integer, String> lastDevices = new LinkedHashMap<>();
    private Map<String, String> lastAllocations = new LinkedHashMap<>();
    private volatile ScheduledExecutorService followUps;
    /** when the changes not yet pushed began to wait for queue room (System.nanoTime), 0 when none wait */
    private long pendingSince;
    private boolean followUpScheduled;
    /** A push asked for by an allocation event has not started yet (events meanwhile need no other). */
    private final AtomicBoolean pushPending = new AtomicBoolean();

    NodeWatcher(GpuScheduler scheduler, GpuInventory inventory, Runnable refresh, SseHub sse, Clock clock,
            Duration interval, Duration window) {
        this.scheduler = scheduler;
        this.inventory = inventory;
        this.refresh = refresh;
        this.sse = sse;
        this.clock = clock;
        this.history = new SampleHistory(clock, window, interval);
    }

    /** One tick: sample, catch up, record, push. Never throws (a failed tick is logged and the next one tries). */
    void tick() {
        try {
            try {
                refresh.run();
            } catch (RuntimeException e) {
                LOG.warn("cannot catch up with the node ledger: {}", e.toString());
            }
            GpuSample sample = inventory.sample();
            scheduler.updateMetrics(sample);
            List<DeviceState> devices = scheduler.devices();
            long now = clock.millis();
            List<Map<String, Object>> points = new ArrayList<>();
            for (DeviceState d : devices) {
                SampleHistory.Point p = point(d, now);
                history.add(d.index(), p);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("gpu", d.index());
                m.put("point", p);
                points.add(m);
            }
            if (sse.size() > 0) {
                sse.broadcast("tick", Views.json(Map.of("t", now, "points", points)));
            }
            List<Allocation> live = pushState(true);
            BiConsumer<GpuSample, List<Allocation>> feed = sweepFeed;
            if (feed != null) {
                try {
                    feed.accept(sample, live); // the same sweep, and the allocations the push read, feed accounting
                } catch (RuntimeException e) {
                    LOG.warn("accounting sweep failed: {}", e.toString());
                }
            }
        } catch (RuntimeException e) {
            LOG.warn("console tick failed: {}", e.toString());
        }
    }

    private volatile BiConsumer<GpuSample, List<Allocation>> sweepFeed;

    /**
     * @param feed gets each tick's sweep after the console used it (the node's accounting sampler), with the live
     *             allocations the tick's push read from the scheduler (caught up with the node ledger at this tick):
     *             one read of them serves both
     */
    void feedSweeps(BiConsumer<GpuSample, List<Allocation>> feed) {
        sweepFeed = feed;
    }

    /**
     * An idle-policy step: pushed as an {@code idle} event (for clients that follow the idle policy) and an
     * {@code audit} event (the page's audit list), and kept in the audit ({@code IDLE_FLAGGED}, {@code IDLE_WARNED},
     * ...).
     */
    void onIdle(IdleNotice n) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", "IDLE_" + n.step().name());
        m.put("at", clock.instant().toString());
        m.put("allocationId", n.allocationId());
        m.put("owner", n.owner().orElse(null));
        m.put("devices", n.devices());
        m.put("idleSeconds", n.idleFor().toSeconds());
        m.put("message", n.message());
        synchronized (audit) {
            audit.addLast(m);
            while (audit.size() > 200) {
                audit.removeFirst();
            }
        }
        String json = Views.json(m);
        sse.broadcast("idle", json);
        sse.broadcast("audit", json); // the page's audit list shows it as it happens
    }

    /**
     * Pushes the devices and allocations that differ from the last push, as {@code delta} events of at most
     * {@value #MAX_DELTA_BYTES} bytes each (a burst of another process's allocations is split, not sent as one event
     * of megabytes). With {@link #followUps} set, one push sends only what the fullest client's queue has room for
     * under {@link SseHub#MAX_QUEUED_BYTES}; the rest stays different from what was sent and goes in follow-up pushes
     * as the queues drain (after {@link #MAX_PACING_MILLIS} ms of waiting, one event per step is sent anyway: a client
     * still that far behind is dropped, as any slow client is). Items are whole, so the pieces may be applied in any
     * order.
     */
    void pushStateIfChanged() {
        pushState(false);
    }

    /**
     * {@link #pushStateIfChanged}. While no client subscribes it reads and sends nothing (the JSON of every device and
     * allocation, on every change, was about a tenth of a busy service's CPU with nobody watching): what the last
     * push left each client with then no longer describes anything, and {@link #subscribe} rebuilds it.
     *
     * @param answer whether the caller needs the live allocations (read from the scheduler even with no client)
     * @return the live allocations it read, or an empty list when {@code answer} is false and it read none
     */
    private synchronized List<Allocation> pushState(boolean answer) {
        if (sse.size() == 0) {
            pendingSince = 0;
            return answer ? scheduler.allocations() : List.of();
        }
        List<Allocation> allocations = scheduler.allocations();
        List<Item> items = changedSince(lastDevices, lastAllocations, allocations, scheduler.devices());
        if (items.isEmpty()) {
            pendingSince = 0;
            return allocations;
        }
        ScheduledExecutorService next = followUps;
        long room = Long.MAX_VALUE;
        boolean waitedLongEnough = true;
        if (next != null) {
            long now = System.nanoTime();
            if (pendingSince == 0) {
                pendingSince = now;
            }
            waitedLongEnough = now - pendingSince > TimeUnit.MILLISECONDS.toNanos(MAX_PACING_MILLIS);
            room = SseHub.MAX_QUEUED_BYTES - QUEUE_MARGIN_BYTES - sse.largestBacklog();
        }
        int sent = 0;
        while (sent < items.size()) {
            List<Object> changedDevices = new ArrayList<>();
            List<Object> upsert = new ArrayList<>();
            List<String> remove = new ArrayList<>();
            long bytes = 0;
            int i = sent;
            for (; i < items.size(); i++) {
                Item it = items.get(i);
                long n = it.json.getBytes(StandardCharsets.UTF_8).length + 1L;
                if (i > sent && bytes + n > MAX_DELTA_BYTES - DELTA_FRAMING_BYTES) {
                    break;
                }
                bytes += n;
                switch (it.kind) {
                    case Item.DEVICE -> changedDevices.add(it.view);
                    case Item.UPSERT -> upsert.add(it.view);
                    default -> remove.add(it.id);
                }
            }
            if (bytes > room && !(waitedLongEnough && sent == 0)) {
                break; // the queues have no room for it yet: a follow-up sends it
            }
            Map<String, Object> delta = new LinkedHashMap<>();
            delta.put("devices", changedDevices);
            delta.put("allocations", Map.of("upsert", upsert, "remove", remove));
            sse.broadcast("delta", Views.json(delta));
            room -= bytes + DELTA_FRAMING_BYTES;
            for (int k = sent; k < i; k++) {
                Item it = items.get(k);
                switch (it.kind) {
                    case Item.DEVICE -> lastDevices.put(it.index, it.json);
                    case Item.UPSERT -> lastAllocations.put(it.id, it.json);
                    default -> lastAllocations.remove(it.id);
                }
            }
            sent = i;
        }
        if (sent == items.size()) {
            pendingSince = 0;
        } else if (!followUpScheduled) {
            try {
                next.schedule(this::followUp, PACING_STEP_MILLIS, TimeUnit.MILLISECONDS);
                followUpScheduled = true;
            } catch (RejectedExecutionException stopped) {
                LOG.debug("console stopping: {} changes not pushed", items.size() - sent);
            }
        }
        return allocations;
    }

    /**
     * @return the devices and allocations whose JSON differs from {@code devicesSent} and {@code allocationsSent}
     *     (each item whole), and the ids sent that are no longer live, in that order
     */
    private static List<Item> changedSince(Map<Integer, String> devicesSent, Map<String, String> allocationsSent,
            List<Allocation> allocations, List<DeviceState> devices) {
        List<Item> items = new ArrayList<>();
        for (Map<String, Object> d : Views.devicesWithoutHolders(devices)) {
            String json = Views.json(d);
            int index = (Integer) d.get("index");
            if (!json.equals(devicesSent.get(index))) {
                items.add(new Item(Item.DEVICE, index, null, d, json));
            }
        }
        Set<String> live = new HashSet<>();
        for (Allocation a : allocations) {
            live.add(a.id());
            Map<String, Object> v = Views.allocation(a);
            String json = Views.json(v);
            if (!json.equals(allocationsSent.get(a.id()))) {
                items.add(new Item(Item.UPSERT, 0, a.id(), v, json));
            }
        }
        for (String id : allocationsSent.keySet()) {
            if (!live.contains(id)) {
                items.add(new Item(Item.REMOVE, 0, id, id, Views.json(id)));
            }
        }
        return items;
    }

    private synchronized void followUp() {
        followUpScheduled = false;
        pushStateIfChanged();
    }

    /** One changed device, allocation or removed allocation id, with its JSON. */
    private record Item(int kind, int index, String id, Object view, String json) {
        static final int DEVICE = 0;
        static final int UPSERT = 1;
        static final int REMOVE = 2;
    }

    /**
     * @param executor runs the pushes allocation events ask for ({@link #pushSoon}) and follow-up pushes when one push
     *                 leaves changes unsent for lack of queue room (the console's ticker, one thread); without it
     *                 every change goes out at once, in bounded events, from the thread that made it
     */
    void followUps(ScheduledExecutorService executor) {
        followUps = executor;
    }

    /**
     * Opens a client's stream with the whole state as its first event, under the same lock as
     * {@link #pushStateIfChanged}, so that no delta falls between the state a client starts from and the deltas it
     * receives.
     *
     * @return the stream, or null when the hub has no room
     */
    synchronized SseHub.Stream subscribe(HttpExchange ex) throws IOException {
        if (sse.size() == 0) {
            // pushes send nothing while no client is there: what the last one left describes no one now. This
            // client starts from the state read below, after the maps: a change between the two reads is in its
            // state and sent again by the next push (items are whole), never missing
            Map<Integer, String> devices = new LinkedHashMap<>();
            Map<String, String> allocations = new LinkedHashMap<>();
            for (Item it : changedSince(Map.of(), Map.of(), scheduler.allocations(), scheduler.devices())) {
                if (it.kind == Item.DEVICE) {
                    devices.put(it.index, it.json);
                } else {
                    allocations.put(it.id, it.json);
                }
            }
            lastDevices = devices;
            lastAllocations = allocations;
        }
        return sse.open(ex, "state", streamState());
    }

    /**
     * The {@code state} event: the devices (without holders: the page derives them from the allocations) and the
     * allocations in page order ({@link AllocationsHandler#PAGE_ORDER}), as long as they fit in
     * {@value #MAX_STATE_ALLOCATION_BYTES} bytes; when they do not, a {@code truncated} marker says how many were sent
     * of how many and where the rest are read
     * ({@code {"reason": "STATE_EVENT_BOUND", "allocationsSent": k, "allocationsTotal": n, "maxBytes": ...,
     * "rest": "/api/v1/allocations?after=<last id sent>&limit=..."}}: a cursor, so an allocation that ends
     * meanwhile shifts none of the rest off the pages).
     */
    String streamState() {
        List<Allocation> allocations = new ArrayList<>(scheduler.allocations());
        allocations.sort(Comparator.comparing(Allocation::id, AllocationsHandler.PAGE_ORDER));
        List<Map<String, Object>> shown = new ArrayList<>();
        long bytes = 0;
        for (Allocation a : allocations) {
            Map<String, Object> v = Views.allocation(a);
            long n = Views.json(v).getBytes(StandardCharsets.UTF_8).length + 1L;
            if (bytes + n > MAX_STATE_ALLOCATION_BYTES) {
                break;
            }
            shown.add(v);
            bytes += n;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("devices", Views.devicesWithoutHolders(scheduler.devices()));
        m.put("allocations", shown);
        if (shown.size() < allocations.size()) {
            Map<String, Object> t = new LinkedHashMap<>();
            t.put("reason", "STATE_EVENT_BOUND");
            t.put("allocationsSent", shown.size());
            t.put("allocationsTotal", allocations.size());
            t.put("maxBytes", MAX_STATE_ALLOCATION_BYTES);
            t.put("rest", shown.isEmpty() ? AllocationsHandler.PATH + "?limit=" + AllocationsHandler.MAX_PAGE
                    : AllocationsHandler.pageAfter(allocations.get(shown.size() - 1).id()));
            m.put("truncated", t);
        }
        return Views.json(m);
    }
    /** Listener for the scheduler's audit events. */
    void onEvent(AllocationEvent e) {
        Map<String, Object> m = Views.event(e);
        synchronized (audit) {
            audit.addLast(m);
            while (audit.size() > 200) {
                audit.removeFirst();
            }
        }
        if (sse.size() > 0) {
            sse.broadcast("audit", Views.json(m));
            pushSoon();
        }
    }

    /**
     * Pushes what changed from the {@link #followUps} thread (the console's ticker), not from the caller's: the
     * scheduler fires events in the thread that made the change (an allocating or releasing client, the node
     * service's fair queue), and a push catches up with the node ledger twice (each a ledger transaction, behind the
     * force in flight) under this watcher's monitor: done in line, every change waited for the pushes of all others.
     * Events that arrive while a push is pending ask for no other: the push that starts after an event shows it
     * (items are whole, so a push that covers several changes is the same as one each). Without a ticker (not yet
     * wired) or once it is shut down, the push runs in line.
     */
    void pushSoon() {
        ScheduledExecutorService pushes = followUps;
        if (pushes == null) {
            pushStateIfChanged();
            return;
        }
        if (!pushPending.compareAndSet(false, true)) {
            return;
        }
        try {
            pushes.execute(() -> {
                pushPending.set(false); // an event after this point asks for the next push
                try {
                    pushStateIfChanged();
                } catch (RuntimeException e) {
                    LOG.warn("pushing the console's changes failed (the next change or tick pushes again): {}",
                            e.toString());
                }
            });
        } catch (RejectedExecutionException stopped) {
            pushPending.set(false); // the console is closing: nobody is left to push to
        }
    }

    /** @return clients receiving events now */
    int subscribers() {
        return sse.size();
    }

    /** @return the last audit events, oldest first */
    List<Map<String, Object>> recentAudit() {
        synchronized (audit) {
            return new ArrayList<>(audit);
        }
    }

    /**
     * @param gpu    a device index, or empty for all
     * @param window how far back (at most the history's ten minutes)
     * @return each GPU's points within the window, oldest first
     */
    Map<Integer, List<SampleHistory.Point>> samples(Optional<Integer> gpu, Duration window) {
        return history.points(gpu, window);
    }

    /** @return the history behind {@link #samples} */
    SampleHistory history() {
        return history;
    }

    private static SampleHistory.Point point(DeviceState d, long now) {
        Optional<GpuMetrics> m = d.metrics();
        return new SampleHistory.Point(now,
                m.filter(x -> x.utilizationPercent().isPresent()).map(x -> x.utilizationPercent().getAsDouble())
                        .orElse(null),
                m.flatMap(GpuMetrics::memoryUsed).map(x -> x.bytes()).orElse(null),
                m.filter(x -> x.temperatureCelsius().isPresent()).map(x -> x.temperatureCelsius().getAsDouble())
                        .orElse(null),
                m.filter(x -> x.powerWatts().isPresent()).map(x -> x.powerWatts().getAsDouble()).orElse(null));
    }
}
