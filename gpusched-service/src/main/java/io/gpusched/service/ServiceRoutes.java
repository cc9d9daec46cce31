package io.gpusched.service;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.server.Caller;
import io.gpusched.server.ConsoleServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

/**
 * The service's routes on the console's route table (docs/SERVICE.md, Routes; {@code /api/v1/whoami} is the
 * console's own): {@code /api/v1/queue}, {@code /jobs...}, {@code /allocations...} (allocate, release and renew for
 * their caller; the console's own allocation routes on the socket are replaced by these), and
 * {@code /devices/{index}/drain|undrain}.
 * Each handler takes its caller from the exchange (the transport's peer credentials; never the request) and lets
 * {@link NodeService} decide what that caller may do. Paths under a prefix that these routes do not serve (such as
 * {@code /api/v1/allocations/{id}/environment}) go to the console's own routes, and so does the list
 * ({@code GET /api/v1/allocations}): the console's pages, with their parameters, bounds and {@code Link} headers.
 */
public final class ServiceRoutes {
    static final String API = "/api/v1";
    /** Largest allocation, renewal, signal or drain body. */
    static final int MAX_BODY = 16 * 1024;
    /** Largest job body (its argv and environment). */
    static final int MAX_JOB_BODY = 1 << 20;

    private final NodeService service;
    private final Function<HttpExchange, Caller> callers;
    private final Function<HttpExchange, BooleanSupplier> gone;
    private volatile HttpHandler console =
            ex -> ServiceExchanges.fail(ex, new ServiceExchanges.NotFound("no such resource: "
                    + ex.getRequestURI().getRawPath()));

    /** Routes whose callers are the console's ({@link Caller#of}), on the console's Jetty transport. */
    public ServiceRoutes(NodeService service) {
        this(service, Caller::of, ClientWatch::of);
    }

    /**
     * @param callers the caller of an exchange (the transport's: {@code Caller::of})
     * @param gone    for an exchange, whether its client's connection has closed (a waiting request is then dropped);
     *                a transport that cannot tell answers never
     */
    ServiceRoutes(NodeService service, Function<HttpExchange, Caller> callers,
            Function<HttpExchange, BooleanSupplier> gone) {
        this.service = Objects.requireNonNull(service, "service");
        this.callers = Objects.requireNonNull(callers, "callers");
        this.gone = Objects.requireNonNull(gone, "gone");
    }

    /** @param v the console's own routing, for paths under these prefixes that the service does not serve */
    public void console(HttpHandler v) {
        console = Objects.requireNonNull(v, "console");
    }

    /** @return the routes by path prefix, for {@code ConsoleServer.Builder.route} */
    public Map<String, HttpHandler> routes() {
        Map<String, HttpHandler> m = new LinkedHashMap<>();
        m.put(API + "/queue", guarded(this::queue));
        m.put(API + "/jobs", guarded(this::jobs));
        m.put(API + "/allocations", guarded(this::allocations));
        for (DeviceState d : service.scheduler().devices()) {
            m.put(API + "/devices/" + d.index(), guarded(this::device));
        }
        return m;
    }

    private interface Route {
        void handle(HttpExchange ex, Caller c, String path) throws IOException, InterruptedException;
    }

    private HttpHandler guarded(Route r) {
        return ex -> {
            try {
                Caller c = callers.apply(ex);
                r.handle(ex, c, ex.getRequestURI().getRawPath());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                ServiceExchanges.fail(ex, new FairQueue.Dropped("the node service is stopping"));
            } catch (RuntimeException e) {
                ServiceExchanges.fail(ex, e);
            } finally {
                ex.close();
            }
        };
    }

    private static void only(HttpExchange ex, String... methods) {
        if (!List.of(methods).contains(ex.getRequestMethod())) {
            ex.getResponseHeaders().set("Allow", String.join(", ", methods));
            throw new MethodNotAllowed(ex.getRequestMethod() + " is not allowed on " + ex.getRequestURI().getRawPath()
                    + "; allowed: " + String.join(", ", methods));
        }
    }

    /** 405. */
    static final class MethodNotAllowed extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        MethodNotAllowed(String m) {
            super(m);
        }
    }

    private static boolean read(HttpExchange ex) {
        return ex.getRequestMethod().equals("GET") || ex.getRequestMethod().equals("HEAD");
    }

    private static String segment(String path, String prefix) {
        String rest = path.substring(prefix.length());
        String s = rest.startsWith("/") ? rest.substring(1) : rest;
        int slash = s.indexOf('/');
        return URLDecoder.decode(slash < 0 ? s : s.substring(0, slash), StandardCharsets.UTF_8);
    }

    private static String tail(String path, String prefix) {
        String rest = path.substring(prefix.length());
        String s = rest.startsWith("/") ? rest.substring(1) : rest;
        int slash = s.indexOf('/');
        return slash < 0 ? "" : s.substring(slash);
    }

    // ------------------------------------------------------------------------------------------------ routes

    private void queue(HttpExchange ex, Caller c, String path) throws IOException {
        if (!path.equals(API + "/queue")) {
            throw new ServiceExchanges.NotFound("no such resource: " + Requests.printable(path));
        }
        only(ex, "GET", "HEAD");
        ServiceExchanges.send(ex, 200, service.queueView());
    }

    private void allocations(HttpExchange ex, Caller c, String path) throws IOException, InterruptedException {
        String base = API + "/allocations";
        if (path.equals(base) || path.equals(base + "/")) {
            if (ex.getRequestMethod().equals("POST")) {
                Requests.Allocate r = Requests.allocate(ServiceExchanges.body(ex, MAX_BODY));
                if (r.maxWait().isPresent()) {
                    ConsoleServer.keepOpen(ex); // the answer comes when the request is served
                }
                Allocation a = service.allocate(c, r.request(), r.maxWait(), gone.apply(ex));
                ex.getResponseHeaders().set("Location", base + "/" + a.id());
                try {
                    ServiceExchanges.send(ex, 201, ServiceViews.allocation(a, service.clock().instant()));
                } catch (IOException clientGone) {
                    // nobody took it: the GPUs go back at once
                    service.scheduler().release(a.id());
                    service.audit().record(c, "release", a.id(), null, "ok", "its client went before the answer");
                    throw clientGone;
                }
                return;
            }
            only(ex, "GET", "HEAD", "POST");
            if (!path.equals(base)) {
                throw new ServiceExchanges.NotFound("no such resource: " + base + "/ (the list is " + base + ")");
            }
            // the list is the console's own, paged and bounded (docs/SERVICE.md): the same parameters, headers
            // and 400s on the socket as over TCP, whatever one user has allocated
            console.handle(ex);
            return;
        }
        String id = segment(path, base);
        String rest = tail(path, base);
        if (rest.isEmpty()) {
            if (ex.getRequestMethod().equals("DELETE")) {
                ServiceExchanges.body(ex, MAX_BODY);
                boolean released = service.release(c, id);
                ServiceExchanges.send(ex, 200, Map.of("id", id, "released", released));
                return;
            }
            only(ex, "GET", "HEAD", "DELETE");
            Allocation a = service.scheduler().allocation(id).orElseThrow(() -> new GpuAllocationException(
                    Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + Requests.printable(id) + "\""));
            ServiceExchanges.send(ex, 200, ServiceViews.allocation(a, service.clock().instant()));
            return;
        }
        if (rest.equals("/renew")) {
            only(ex, "POST");
            Duration lease = Requests.lease(ServiceExchanges.body(ex, MAX_BODY));
            Allocation a = service.renew(c, id, lease);
            ServiceExchanges.send(ex, 200, ServiceViews.allocation(a, service.clock().instant()));
            return;
        }
        console.handle(ex);
    }

    private void device(HttpExchange ex, Caller c, String path) throws IOException {
        String base = API + "/devices";
        String idx = segment(path, base);
        String rest = tail(path, base);
        int index;
        try {
            index = Integer.parseInt(idx);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("GPU index \"" + Requests.printable(idx) + "\" is not a number");
        }
        switch (rest) {
            case "/drain" -> {
                only(ex, "POST");
                String reason = Requests.reason(ServiceExchanges.body(ex, MAX_BODY));
                service.drain(c, index, reason);
            }
            case "/undrain" -> {
                only(ex, "POST");
                ServiceExchanges.body(ex, MAX_BODY);
                service.undrain(c, index);
            }
            default -> {
                console.handle(ex);
                return;
            }
        }
        DeviceState d = service.scheduler().devices().stream().filter(x -> x.index() == index).findFirst()
                .orElseThrow();
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("index", d.index());
        v.put("uuid", d.device().uuid());
        v.put("name", d.device().name());
        v.put("pool", d.pool().name());
        v.put("poolReason", d.poolReason().orElse(null));
        v.put("holder", d.exclusiveHolder().orElse(null));
        ServiceExchanges.send(ex, 200, v);
    }

    private void jobs(HttpExchange ex, Caller c, String path) throws IOException, InterruptedException {
        String base = API + "/jobs";
        Jobs jobs = service.jobs();
        if (path.equals(base) || path.equals(base + "/")) {
            if (ex.getRequestMethod().equals("POST")) {
                start(ex, c);
                return;
            }
            only(ex, "GET", "HEAD", "POST");
            ServiceExchanges.send(ex, 200, jobs.all().stream().map(j -> j.view(c)).toList());
            return;
        }
        String id = segment(path, base);
        String rest = tail(path, base);
        switch (rest) {
            case "" -> {
                if (ex.getRequestMethod().equals("DELETE")) {
                    ServiceExchanges.body(ex, MAX_BODY);
                    Job j = service.cancelJob(c, id);
                    ServiceExchanges.send(ex, 200, j.view(c));
                    return;
                }
                only(ex, "GET", "HEAD", "DELETE");
                ServiceExchanges.send(ex, 200, jobs.get(id).view(c));
            }
            case "/signal" -> {
                only(ex, "POST");
                String signal = Requests.signal(ServiceExchanges.body(ex, MAX_BODY));
                service.signalJob(c, id, signal);
                ServiceExchanges.send(ex, 200, jobs.get(id).view(c));
            }
            case "/logs" -> {
                only(ex, "GET");
                boolean follow = "follow=true".equals(ex.getRequestURI().getRawQuery());
                logs(ex, c, id, follow);
            }
            default -> throw new ServiceExchanges.NotFound("no such resource: " + Requests.printable(path));
        }
    }

    private void logs(HttpExchange ex, Caller c, String id, boolean follow) throws IOException, InterruptedException {
        service.checkLogs(c, id);
        if (follow) {
            ConsoleServer.keepOpen(ex);
        }
        ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        ex.sendResponseHeaders(200, 0);
        try (OutputStream out = ex.getResponseBody()) {
            service.jobs().logs(c, id, follow, out);
        }
    }

    private void start(HttpExchange ex, Caller c) throws IOException, InterruptedException {
        Requests.Job r = Requests.job(ServiceExchanges.body(ex, MAX_JOB_BODY));
        if (!r.detach()) {
            // an attached job's answer comes once it started (after a wait), and its output may pause for hours (a
            // heartbeat checks its client): held open, or refused (maxHeldRequests) before anything is prepared. A
            // detached one is answered once it started or was refused (no wait) or queued (a wait), like a plain
            // allocation: it holds no slot
            ConsoleServer.keepOpen(ex);
        }
        Job job = service.prepareJob(c, r);
        if (r.detach()) {
            service.jobs().detach(job);
            ServiceExchanges.send(ex, 201, job.view(c));
            return;
        }
        StreamSink sink = new StreamSink(ex, service, c, gone.apply(ex));
        boolean abandoned = false;
        try {
            Optional<Allocation> a = service.jobs().allocate(job, sink);
            if (a.isEmpty()) {
                // cancelled by its owner or an admin (409 CANCELLED); else its client went or the service stops
                RuntimeException d = Jobs.notStarted(job);
                if (sink.begun()) {
                    sink.error(d);
                } else {
                    ServiceExchanges.fail(ex, d);
                }
                return;
            }
            service.jobs().run(job, a.get(), sink);
        } catch (RuntimeException e) {
            if (sink.abandon()) {
                // refused before its stream began: the guard answers with the refusal's own status; closing the
                // sink here would close the exchange first (an empty 200)
                abandoned = true;
                throw e;
            }
            sink.error(e);
        } finally {
            if (!abandoned) {
                sink.close();
            }
        }
    }
}
