package io.gpusched.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import java.io.IOException;

/**
 * {@code /api/v1/events}: the server-sent event stream ({@code state} first, then {@code tick}, {@code state} and
 * {@code audit} events). A stream holds its handler's worker thread for the stream's life (see
 * {@link SseHub.Stream#await()}: an abnormal end is thrown out of the handler, so that the server aborts the
 * connection); the pool has a thread per allowed stream on top of the request workers ({@link ConsoleWorkers}).
 * HEAD answers the headers only; past {@code maxClients} streams a client gets 503.
 */
final class EventsHandler implements HttpHandler {
    static final String PATH = ConsoleServer.API + "/events";

    private final SseHub sse;
    private final NodeWatcher watcher;
    private final ConsoleWorkers workers;
    private final int maxClients;

    EventsHandler(SseHub sse, NodeWatcher watcher, ConsoleWorkers workers, int maxClients) {
        this.sse = sse;
        this.watcher = watcher;
        this.workers = workers;
        this.maxClients = maxClients;
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        Exchanges.get(ex, () -> stream(ex));
    }

    private void stream(HttpExchange ex) throws IOException {
        if (ex.getRequestMethod().equals("HEAD")) { // the headers only: no stream, no held worker, no JDK warning
            ex.getResponseHeaders().set("Content-Type", Exchanges.EVENT_STREAM);
            ex.getResponseHeaders().set("Cache-Control", "no-store");
            ex.sendResponseHeaders(200, -1);
            ex.close();
            return;
        }
        Exchanges.keepOpen(ex); // a stream is silent between events; the heartbeat and the stall check watch it
        SseHub.Stream stream = sse.open(ex, "state", Views.json(watcher.state()));
        if (stream == null) {
            Exchanges.error(ex, 503, "too many event-stream clients (" + maxClients + ")", null);
            return;
        }
        workers.hold(1);
        try {
            stream.await(); // throws when the stream ended abnormally: ExchangeFilter lets it out of the handler
        } finally {
            workers.hold(-1);
        }
    }
}
