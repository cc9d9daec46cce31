package io.gpusched.server;

import io.gpusched.server.ClientConnectionFactory.Client;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What one client may hold at once, so that no local user can take every slot and stall or blind the console and the
 * node socket: open connections, requests being handled and event streams, each per client, and connections for
 * everyone together. A client is a uid (the socket's peer; on TCP the owner of the client's socket, found as identd
 * does, see {@link TcpOwners}), or a remote address for a client on another host. Root (uid 0) is held by the global
 * limit only: it administers the node and can stop the service anyway.
 *
 * <p>Every refusal is {@code 429} with reason {@code TOO_MANY_CONNECTIONS}, naming the limit and its value, but that of
 * requests held open ({@link #acquireHeld}), which a host's route refuses with its own typed error.
 */
final class ClientLimits {
    /** The limits, each at least 1. */
    record Settings(int connectionsPerClient, int requestsPerClient, int streamsPerClient, int connections,
            int heldRequests) {
    }

    /** What is counted. */
    enum Kind {
        CONNECTIONS("connections per client", "maxConnectionsPerClient"),
        REQUESTS("requests in progress per client", "maxRequestsPerClient"),
        STREAMS("event streams per client", "maxEventStreamsPerClient");

        final String words;
        final String setting;

        Kind(String words, String setting) {
            this.words = words;
            this.setting = setting;
        }
    }

    private final Settings settings;
    private final Map<String, int[]> perClient = new ConcurrentHashMap<>();
    private final AtomicInteger connections = new AtomicInteger();
    private final AtomicInteger held = new AtomicInteger();
    /** Requests whose handler runs, every client's (root's too), held open or not. */
    private final AtomicInteger inProgress = new AtomicInteger();
    private final Map<String, AtomicLong> refused = new ConcurrentHashMap<>();

    ClientLimits(Settings settings) {
        this.settings = settings;
    }

    Settings settings() {
        return settings;
    }

    private int max(Kind k) {
        return switch (k) {
            case CONNECTIONS -> settings.connectionsPerClient();
            case REQUESTS -> settings.requestsPerClient();
            case STREAMS -> settings.streamsPerClient();
        };
    }

    /**
     * Takes one connection slot: the global one, then the client's.
     *
     * @return null when taken (give it back with {@link #releaseConnection}), else the refusal's sentence
     */
    String acquireConnection(Client c) {
        if (connections.incrementAndGet() > settings.connections()) {
            connections.decrementAndGet();
            count("maxConnections");
            return "the console has " + settings.connections() + " connections open, its limit for all clients"
                    + " together (maxConnections); try again shortly";
        }
        String r = acquire(c, Kind.CONNECTIONS);
        if (r != null) {
            connections.decrementAndGet();
        }
        return r;
    }

    /**
     * Takes one of the slots of requests held open (a request that waits in a queue, a job's output streamed), all
     * clients together, root too: each holds a worker thread, and {@code heldRequests} is below the workers so that
     * the others stay for every other request.
     *
     * @return null when taken (give it back with {@link #releaseHeld}), else the refusal's sentence
     */
    String acquireHeld() {
        if (held.incrementAndGet() > settings.heldRequests()) {
            held.decrementAndGet();
            count("maxHeldRequests");
            return "the console holds " + settings.heldRequests() + " requests open already (waiting in the queue or"
                    + " streaming a job's output), its limit for all clients together (maxHeldRequests), so that its"
                    + " other workers stay for every other request; try again once some have ended";
        }
        return null;
    }

    void releaseHeld() {
        held.decrementAndGet();
    }

    /** @return requests held open now, all clients together */
    int held() {
        return held.get();
    }

    /** A request's handling begins (every request, limited or not: {@link ConsoleServer#close} waits for them). */
    void begin() {
        inProgress.incrementAndGet();
    }

    /** A request's handling ended, its answer given. */
    void end() {
        inProgress.decrementAndGet();
    }

    /** @return requests being handled now, all clients together, held open or not */
    int inProgress() {
        return inProgress.get();
    }

    void releaseConnection(Client c) {
        release(c, Kind.CONNECTIONS);
        connections.decrementAndGet();
    }

    /**
     * @return null when taken (give it back with {@link #release}), else the refusal's sentence
     */
    String acquire(Client c, Kind k) {
        if (c.exempt()) {
            return null;
        }
        int max = max(k);
        boolean[] ok = new boolean[1];
        perClient.compute(c.key(), (key, v) -> {
            int[] n = v != null ? v : new int[Kind.values().length];
            if (n[k.ordinal()] < max) {
                n[k.ordinal()]++;
                ok[0] = true;
            }
            return n;
        });
        if (ok[0]) {
            return null;
        }
        perClient.computeIfPresent(c.key(), (key, v) -> empty(v) ? null : v);
        count(k.setting);
        return c.describe() + " has " + max + " " + k.words + " already, the limit (" + k.setting + "); close some"
                + " or try again shortly";
    }

    void release(Client c, Kind k) {
        if (c.exempt()) {
            return;
        }
        perClient.computeIfPresent(c.key(), (key, v) -> {
            if (v[k.ordinal()] > 0) {
                v[k.ordinal()]--;
            }
            return empty(v) ? null : v;
        });
    }

    private static boolean empty(int[] v) {
        for (int x : v) {
            if (x != 0) {
                return false;
            }
        }
        return true;
    }

    private void count(String limit) {
        refused.computeIfAbsent(limit, x -> new AtomicLong()).incrementAndGet();
    }

    /** @return refusals since start, by limit name (for /metrics and tests) */
    Map<String, Long> refused() {
        Map<String, Long> m = new LinkedHashMap<>();
        refused.forEach((k, v) -> m.put(k, v.get()));
        return m;
    }

    /** @return connections open, all clients together */
    int connections() {
        return connections.get();
    }

    /** @return what one client holds now: connections, requests, streams */
    int[] held(String key) {
        int[] v = perClient.get(key);
        return v == null ? new int[Kind.values().length] : v.clone();
    }

    /** @return clients holding anything now */
    int clients() {
        return perClient.size();
    }
}
