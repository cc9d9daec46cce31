package io.gpusched.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node console: a web page, a JSON REST API under {@code /api/v1} with server-sent events, an OpenAPI document
 * and Prometheus {@code /metrics}, over the JDK's own HTTP server ({@code com.sun.net.httpserver}).
 *
 * <p>Security: it listens on loopback unless told otherwise ({@link Builder#allowRemote}); reads are open to loopback
 * clients only (others need the token too); every change (POST, DELETE) needs {@code Authorization: Bearer <token>}
 * with the token from {@link ApiToken} in the state directory. No cookies are read, so there is no CSRF. Request
 * bodies are capped ({@link Builder#maxBodyBytes}); allocations go through the scheduler, so the ledger's rate limits
 * apply.
 *
 * <p>Host rule (DNS rebinding: a page whose name is re-pointed at 127.0.0.1 makes a local browser a loopback client,
 * but its requests still carry its own name in {@code Host}): every request, on every path (page, assets, REST, events,
 * metrics), is refused with 421 and a JSON error naming the Host and what is accepted unless its Host, with any port,
 * is {@code localhost}, an IPv4 literal in 127.0.0.0/8, {@code [::1]}, or a name given to {@link Builder#allowedHosts}
 * ({@code --allowed-host}); when listening beyond loopback, also any IP literal (a literal cannot be re-pointed) and
 * this host's name. The port is not compared (an SSH tunnel's local port differs; a rebinding page is refused by its
 * name). A request without Host is accepted on HTTP/1.0 only (400 on HTTP/1.1), and two Host headers are 400.
 *
 * <p>Limits, and which of them are this server's own: the body limit is enforced by this class (a bounded read; a
 * declared or streamed body over it is 413), per server. Event-stream clients that do not read are dropped by this
 * class (see {@link #eventClients()}). Two limits only the JDK's server can enforce, and it offers no per-server hook
 * for them, only JVM-wide system properties read once, when the first {@code HttpServer} of the JVM is created:
 * <ul>
 *   <li>the time to receive a whole request ({@code sun.net.httpserver.maxReqTime}, unlimited by default, so a client
 *       that never finishes its headers or body would hold a worker forever): {@link #start()} sets it to
 *       {@value #JDK_MAX_REQ_TIME_SECONDS} s <em>only if the property is unset</em>, so a host's own value is never
 *       overridden; in a host JVM that created an {@code HttpServer} before, it has no effect (set it at launch);</li>
 *   <li>the size of request headers ({@code sun.net.httpserver.maxReqHeaderSize}): not set here; JDK 17.0.15 bounds
 *       headers at 380 KiB by default (older builds did not: set the property at launch on those).</li>
 * </ul>
 *
 * <p>Start it with {@link #builder()}, then {@link #start()}; {@link #close()} stops it. The caller keeps ownership of
 * the scheduler and the inventory.
 */
public final class ConsoleServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConsoleServer.class);
    private static final String API = "/api/v1";
    /** How far back the per-GPU sample history reaches (served by /api/v1/samples, drawn as sparklines). */
    static final Duration HISTORY = Duration.ofMinutes(10);
    /** The shortest sampling interval ({@link Builder#sampleInterval}). */
    public static final Duration MIN_SAMPLE_INTERVAL = Duration.ofMillis(1);

    /** Seconds a client may take to send a whole request; see the class comment. */
    static final long JDK_MAX_REQ_TIME_SECONDS = 10;
    static final String JDK_MAX_REQ_TIME = "sun.net.httpserver.maxReqTime";

    /**
     * Sets the JDK server's JVM-wide request time limit when the host has not set it; a value already there (from
     * the command line or the host's code) is kept as it is.
     *
     * @return whether this call set it
     */
    static synchronized boolean applyJdkRequestTimeLimit() {
        if (System.getProperty(JDK_MAX_REQ_TIME) != null) {
            return false;
        }
        System.setProperty(JDK_MAX_REQ_TIME, Long.toString(JDK_MAX_REQ_TIME_SECONDS));
        return true;
    }

    private final Builder b;
    private final ApiToken token;
    private final PrometheusMeterRegistry registry;
    private final SchedulerMeterBinder schedulerMeters;
    private final SseHub sse;
    private final NodeWatcher watcher;
    private final ThreadPoolExecutor workers;
    private final Object poolLock = new Object();
    /** worker threads held by event streams; the pool's size is {@code b.threads} plus these */
    private int heldWorkers;
    private final ScheduledExecutorService ticker;
    private final String hostname;
    private final Map<String, Route> routes = new LinkedHashMap<>();
    private HttpServer server;

    private ConsoleServer(Builder b) {
        this.b = b;
        this.token = ApiToken.loadOrCreate(b.stateDir);
        this.hostname = hostname();
        // threads start on demand and end after 30 s idle: a client that stalls mid-request holds one worker until
        // the JDK server's request time limit cuts it (JDK_MAX_REQ_TIME), so many workers keep others served; each
        // open event stream holds one more for its life, and the pool grows by one for it (holdWorker)
        this.workers = new ThreadPoolExecutor(b.threads, b.threads, 30, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(4096), daemon("gpusched-console-http"),
                new ThreadPoolExecutor.AbortPolicy());
        workers.allowCoreThreadTimeOut(true);
        this.ticker = Executors.newSingleThreadScheduledExecutor(daemon("gpusched-console-tick"));
        this.sse = new SseHub(b.maxSseClients, b.eventStall.toNanos(), daemon("gpusched-console-sse"));
        this.watcher = new NodeWatcher(b.scheduler, b.inventory, b.refresh, sse, b.clock, b.sampleInterval,
                HISTORY);
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config().namingConvention(DcgmMeterBinder.namingConvention());
        new DcgmMeterBinder(b.scheduler::devices, hostname).bindTo(registry);
        this.schedulerMeters = new SchedulerMeterBinder(b.scheduler);
        schedulerMeters.bindTo(registry);
        Gauge.builder("gpusched.console.event.clients", sse, SseHub::size)
                .description("Event-stream clients receiving events").register(registry);
        Gauge.builder("gpusched.console.event.connections", sse, SseHub::connections)
                .description("Event-stream connections held, slow clients dropped but still in a write included")
                .register(registry);
        FunctionCounter.builder("gpusched.console.event.dropped", sse, SseHub::dropped)
                .description("Slow event-stream clients dropped (queue over its bound or a write stalled)")
                .register(registry);
        Gauge.builder("gpusched.console.event.queued", sse, SseHub::queuedBytes).baseUnit("bytes")
                .description("Bytes queued for event-stream clients, summed over clients").register(registry);
        routes.putAll(assetRoutes());
        routes.putAll(apiRoutes());
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Feeds the console an allocation event (audit stream, refusal counts). The scheduler is built before the
     * console, so register a forwarding listener on it, e.g. {@code AtomicReference<ConsoleServer> ref; ...
     * .listener(e -> ref.get().onEvent(e))}, or call this from a listener you have.
     *
     * @param event an allocation event
     */
    public void onEvent(io.gpusched.core.AllocationEvent event) {
        schedulerMeters.onEvent(event);
        watcher.onEvent(event);
    }

    /**
     * Binds the socket and starts serving.
     *
     * @return this
     * @throws UncheckedIOException when the address cannot be bound
     * @throws IllegalArgumentException when asked to listen beyond loopback without {@link Builder#allowRemote}
     */
    public ConsoleServer start() {
        InetSocketAddress listen = b.listen;
        if (!listen.getAddress().isLoopbackAddress() && !b.allowRemote) {
            throw new IllegalArgumentException("--listen " + listen.getAddress().getHostAddress() + " is not a"
                    + " loopback address; the console listens beyond this host only when asked (--allow-remote),"
                    + " and then every request needs the bearer token");
        }
        applyJdkRequestTimeLimit();
        try {
            server = HttpServer.create(listen, 256);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on " + listen + ": " + e.getMessage(), e);
        }
        try {
            server.setExecutor(workers);
            server.createContext("/", this::dispatch);
            server.start();
            if (b.ticking) {
                ticker.scheduleWithFixedDelay(watcher::tick, 0, b.sampleInterval.toMillis(), TimeUnit.MILLISECONDS);
            }
            ticker.scheduleWithFixedDelay(sse::heartbeat, 15, 15, TimeUnit.SECONDS);
        } catch (RuntimeException | Error e) { // never leave the port listening behind a start that failed
            HttpServer s = server;
            server = null;
            s.stop(0);
            throw e;
        }
        LOG.info("gpusched console on {}/ (token in {})", url(), token.file());
        return this;
    }

    /**
     * @return the bound address (the port is real when 0 was asked for)
     * @throws IllegalStateException when the server is not listening (not started, or its start failed)
     */
    public InetSocketAddress address() {
        HttpServer s = server;
        if (s == null) {
            throw new IllegalStateException("the console is not listening (not started, or its start failed)");
        }
        InetSocketAddress a = s.getAddress();
        return new InetSocketAddress(a.getAddress(), a.getPort());
    }

    /** @return the base URL, e.g. http://127.0.0.1:9400 */
    public String url() {
        InetSocketAddress a = address();
        String host = a.getAddress().getHostAddress();
        return "http://" + (host.contains(":") ? "[" + host + "]" : host) + ":" + a.getPort();
    }

    /** @return the token that changes need */
    public ApiToken token() {
        return token;
    }

    /** @return the Prometheus registry behind /metrics (to add meters of your own) */
    public PrometheusMeterRegistry registry() {
        return registry;
    }

    /** @return how many event-stream clients are connected */
    public int eventClients() {
        return sse.size();
    }

    /** @return the event stream (for tests) */
    SseHub eventHub() {
        return sse;
    }

    /** @return the JDK server (for tests that read its connection records) */
    HttpServer httpServer() {
        return server;
    }

    /** @return the node watcher (for tests) */
    NodeWatcher watcher() {
        return watcher;
    }

    @Override
    public void close() {
        ticker.shutdownNow();
        sse.close();
        if (server != null) {
            server.stop(0);
        }
        workers.shutdownNow();
        registry.close();
    }

    // ---------------------------------------------------------------------------------------------------- routing

    private void dispatch(HttpExchange ex) throws IOException {
        try {
            ex.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
            ex.getResponseHeaders().set("Referrer-Policy", "no-referrer");
            String method = ex.getRequestMethod();
            String path = ex.getRequestURI().getRawPath();
            String refused = hostRefusal(ex);
            if (refused != null) {
                drain(ex);
                error(ex, refused.startsWith("HTTP/1.1") ? 400 : 421, refused, null);
                return;
            }
            boolean loopback = ex.getRemoteAddress().getAddress().isLoopbackAddress();
            boolean authorized = token.accepts(ex.getRequestHeaders().getFirst("Authorization"));
            boolean change = !method.equals("GET") && !method.equals("HEAD");
            if (change && !authorized) {
                ex.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"gpusched\"");
                drain(ex);
                error(ex, 401, "changes need Authorization: Bearer <token> (the token is in "
                        + token.file() + ")", null);
                return;
            }
            if (!change && !loopback && !authorized) {
                error(ex, 401, "reads from beyond this host need the bearer token too", null);
                return;
            }
            route(ex, method, path);
        } catch (RequestTooLarge e) {
            error(ex, 413, e.getMessage(), null);
        } catch (IllegalArgumentException e) {
            error(ex, 400, e.getMessage(), null);
        } catch (RuntimeException e) {
            LOG.warn("console request {} {} failed", ex.getRequestMethod(), ex.getRequestURI(), e);
            error(ex, 500, "internal error: " + e, null);
        } finally {
            if (!"text/event-stream; charset=utf-8".equals(ex.getResponseHeaders().getFirst("Content-Type"))) {
                ex.close();
            }
        }
    }

    /**
     * The Host rule against DNS rebinding (a page whose name is re-pointed at this host makes a local browser a
     * loopback client, but its requests still name the page's host). Accepted, with any port or none: loopback names
     * ({@code localhost}, IPv4 literals in 127.0.0.0/8, {@code [::1]}) and the names given to
     * {@link Builder#allowedHosts}; when listening beyond loopback ({@link Builder#allowRemote}), also any IP literal
     * (a literal cannot be re-pointed) and this host's name. A request without a Host is accepted on HTTP/1.0 only.
     *
     * @return why the request is refused, or null when its Host is accepted
     */
    private String hostRefusal(HttpExchange ex) {
        List<String> hosts = ex.getRequestHeaders().get("Host");
        if (hosts == null || hosts.isEmpty()) {
            return ex.getProtocol().equalsIgnoreCase("HTTP/1.0") ? null
                    : "HTTP/1.1 requests need a Host header (RFC 9112 section 3.2)";
        }
        if (hosts.size() > 1) {
            return "HTTP/1.1 requests carry one Host header; this one has " + hosts.size();
        }
        String host = hosts.get(0);
        return hostAccepted(host, remote(), b.allowedHosts, hostname) ? null
                : "Host " + SampleHistory.printable(host) + " is not served here (DNS rebinding guard); accepted: "
                + acceptedHosts();
    }

    /** @return whether this server listens beyond loopback */
    private boolean remote() {
        return !b.listen.getAddress().isLoopbackAddress();
    }

    /** @return the accepted Host names, in words, for the refusal */
    private String acceptedHosts() {
        StringBuilder s = new StringBuilder("localhost, 127.0.0.0/8 literals, [::1]");
        if (remote()) {
            s.append(", any IP literal, ").append(hostname);
        }
        for (String h : b.allowedHosts) {
            s.append(", ").append(h);
        }
        return s.append(" (any port); add names with --allowed-host").toString();
    }

    /**
     * @param host      a Host header's value ({@code name}, {@code name:port}, {@code [v6]} or {@code [v6]:port})
     * @param remote    whether the server listens beyond loopback
     * @param allowed   more names the operator accepts (lower case, no port)
     * @param localName this host's name (accepted when remote)
     * @return whether the Host is accepted
     */
    static boolean hostAccepted(String host, boolean remote, List<String> allowed, String localName) {
        String name;
        boolean literal6 = false;
        if (host.startsWith("[")) {
            int end = host.indexOf(']');
            if (end < 0 || !portOk(host.substring(end + 1))) {
                return false;
            }
            name = host.substring(1, end);
            literal6 = true;
        } else {
            int colon = host.indexOf(':');
            name = colon < 0 ? host : host.substring(0, colon);
            if (colon >= 0 && !portOk(host.substring(colon))) {
                return false;
            }
        }
        name = name.toLowerCase(java.util.Locale.ROOT);
        if (name.isEmpty() || !name.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
            return false;
        }
        if (literal6) {
            byte[] a = ipv6(name);
            return a != null && (remote || isLoopback6(a));
        }
        int[] v4 = ipv4(name);
        if (v4 != null) {
            return remote || v4[0] == 127;
        }
        if (name.equals("localhost") || allowed.contains(name)) {
            return true;
        }
        return remote && name.equals(localName.toLowerCase(java.util.Locale.ROOT));
    }

    private static boolean portOk(String rest) {
        return rest.isEmpty() || rest.length() >= 2 && rest.length() <= 6 && rest.charAt(0) == ':'
                && rest.substring(1).chars().allMatch(c -> c >= '0' && c <= '9');
    }

    /** @return the four octets of a dotted-quad IPv4 literal (ASCII digits, each 0-255), or null */
    private static int[] ipv4(String s) {
        String[] parts = s.split("\\.", -1);
        if (parts.length != 4) {
            return null;
        }
        int[] out = new int[4];
        for (int i = 0; i < 4; i++) {
            String p = parts[i];
            if (p.isEmpty() || p.length() > 3 || !p.chars().allMatch(c -> c >= '0' && c <= '9')) {
                return null;
            }
            out[i] = Integer.parseInt(p);
            if (out[i] > 255) {
                return null;
            }
        }
        return out;
    }

    /** @return the 16 bytes of an IPv6 literal (hex digits, colons, optional dotted tail; no zone), or null */
    private static byte[] ipv6(String s) {
        if (s.isEmpty() || s.indexOf(':') < 0 || !s.chars().allMatch(c -> c == ':' || c == '.'
                || c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
            return null;
        }
        try { // only hex, colons and dots reach here, so this never resolves a name
            InetAddress a = InetAddress.getByName("[" + s + "]");
            byte[] raw = a.getAddress();
            return raw.length == 16 ? raw : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static boolean isLoopback6(byte[] a) {
        for (int i = 0; i < 15; i++) {
            if (a[i] != 0) {
                return false;
            }
        }
        return a[15] == 1;
    }

    /** A handler for one path. */
    private interface Route {
        void handle(HttpExchange ex, String method) throws IOException;
    }

    /** The page's own files (not part of the API document). */
    private Map<String, Route> assetRoutes() {
        Map<String, Route> r = new LinkedHashMap<>();
        r.put("/", (ex, m) -> asset(ex, m, "index.html", "text/html; charset=utf-8"));
        r.put("/index.html", (ex, m) -> asset(ex, m, "index.html", "text/html; charset=utf-8"));
        r.put("/app.js", (ex, m) -> asset(ex, m, "app.js", "text/javascript; charset=utf-8"));
        r.put("/app.css", (ex, m) -> asset(ex, m, "app.css", "text/css; charset=utf-8"));
        r.put("/favicon.svg", (ex, m) -> asset(ex, m, "favicon.svg", "image/svg+xml"));
        return r;
    }

    /** The API and /metrics, each path as the OpenAPI document names it. */
    private Map<String, Route> apiRoutes() {
        Map<String, Route> r = new LinkedHashMap<>();
        r.put("/metrics", (ex, m) -> get(ex, m, () -> text(ex, 200, registry.scrape(),
                "text/plain; version=0.0.4; charset=utf-8")));
        r.put(API + "/openapi.json", (ex, m) -> asset(ex, m, "openapi.json", "application/json"));
        r.put(API + "/node", (ex, m) -> get(ex, m, () -> json(ex, 200, node())));
        r.put(API + "/devices", (ex, m) -> get(ex, m, () -> json(ex, 200, watcher.state().get("devices"))));
        r.put(API + "/topology", (ex, m) -> get(ex, m, () -> json(ex, 200, topology())));
        r.put(API + "/samples", (ex, m) -> get(ex, m, () -> {
            Map<String, String> q = query(ex, "gpu", "window");
            Optional<Integer> gpu = Optional.ofNullable(q.get("gpu")).map(this::parseIndex);
            Duration window = Optional.ofNullable(q.get("window")).map(ConsoleServer::parseWindow).orElse(HISTORY);
            json(ex, 200, watcher.samples(gpu, window));
        }));
        r.put(API + "/doctor", (ex, m) -> get(ex, m, () -> json(ex, 200, DoctorReport.collect(b.cudaPaths))));
        r.put(API + "/audit", (ex, m) -> get(ex, m, () -> json(ex, 200, watcher.recentAudit())));
        r.put(API + "/events", (ex, m) -> get(ex, m, () -> events(ex)));
        r.put(API + "/allocations", (ex, m) -> {
            if (m.equals("POST")) {
                allocate(ex);
            } else {
                get(ex, m, () -> json(ex, 200, watcher.state().get("allocations")));
            }
        });
        return r;
    }

    private static final String ALLOCATION_PREFIX = API + "/allocations/";

    /** @return every path this server answers, the API's as its OpenAPI document spells them (for tests) */
    Map<String, Boolean> servedPaths() {
        Map<String, Boolean> m = new LinkedHashMap<>();
        assetRoutes().keySet().forEach(k -> m.put(k, false));
        apiRoutes().keySet().forEach(k -> m.put(k, true));
        m.put(ALLOCATION_PREFIX + "{id}", true);
        return m;
    }

    private void route(HttpExchange ex, String method, String path) throws IOException {
        Route r = routes.get(path);
        if (r != null) {
            r.handle(ex, method);
        } else if (path.startsWith(ALLOCATION_PREFIX)) {
            String id = URLDecoder.decode(path.substring(ALLOCATION_PREFIX.length()), StandardCharsets.UTF_8);
            if (method.equals("DELETE")) {
                release(ex, id);
            } else {
                get(ex, method, () -> {
                    Optional<Allocation> a = b.scheduler.allocation(id);
                    if (a.isPresent()) {
                        json(ex, 200, Views.allocation(a.get()));
                    } else {
                        error(ex, 404, "no allocation \"" + id + "\"", "UNKNOWN_ALLOCATION");
                    }
                });
            }
        } else {
            error(ex, 404, "no such resource: " + path + " (see " + API + "/openapi.json)", null);
        }
    }

    private interface Io {
        void run() throws IOException;
    }

    private void get(HttpExchange ex, String method, Io io) throws IOException {
        if (!method.equals("GET") && !method.equals("HEAD")) {
            ex.getResponseHeaders().set("Allow", "GET");
            error(ex, 405, method + " is not allowed here", null);
            return;
        }
        io.run();
    }

    // ---------------------------------------------------------------------------------------------------- handlers

    private Map<String, Object> node() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("hostname", hostname);
        m.put("backend", b.inventory.backend());
        m.put("simulated", b.inventory.backend().startsWith("simulated:"));
        m.put("gpus", b.inventory.devices().size());
        m.put("strategy", b.scheduler.strategy().name());
        m.put("stateDir", b.stateDir.toString());
        m.put("eventClients", sse.size());
        m.put("eventClientsDropped", sse.dropped());
        m.put("version", "0.1.0");
        return m;
    }

    private Map<String, Object> topology() {
        var devices = b.inventory.devices();
        var t = b.inventory.topology();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("devices", devices.stream().map(d -> d.index()).toList());
        m.put("matrix", TopologyGrid.matrix(devices, t));
        List<Object> numa = new ArrayList<>();
        for (var d : devices) {
            numa.add(t.numaNode(d.index()).isPresent() ? t.numaNode(d.index()).getAsInt() : null);
        }
        m.put("numa", numa);
        m.put("legend", "X self; NV#/XG# NVLink/XGMI with # links; PIX one PCIe switch; PXB several; PHB host"
                + " bridge; NODE within a NUMA node; SYS across sockets");
        return m;
    }

    /**
     * An event stream holds its handler's worker thread for the stream's life (see {@link SseHub.Stream#await()}: an
     * abnormal end is thrown out of the handler so that the JDK server forgets the connection). The pool grows by one
     * thread per held stream, so {@code threads} workers stay for everything else.
     */
    private void events(HttpExchange ex) throws IOException {
        if (ex.getRequestMethod().equals("HEAD")) { // the headers only: no stream, no held worker, no JDK warning
            ex.getResponseHeaders().set("Content-Type", "text/event-stream; charset=utf-8");
            ex.getResponseHeaders().set("Cache-Control", "no-store");
            ex.sendResponseHeaders(200, -1);
            ex.close();
            return;
        }
        SseHub.Stream stream = sse.open(ex, "state", Views.json(watcher.state()));
        if (stream == null) {
            error(ex, 503, "too many event-stream clients (" + b.maxSseClients + ")", null);
            return;
        }
        holdWorker(1);
        try {
            stream.await(); // throws when the stream ended abnormally: dispatch lets it out of handle()
        } finally {
            holdWorker(-1);
        }
    }

    private void holdWorker(int delta) {
        synchronized (poolLock) {
            heldWorkers += delta;
            int n = b.threads + heldWorkers;
            if (delta > 0) { // the maximum never goes below the core size
                workers.setMaximumPoolSize(n);
                workers.setCorePoolSize(n);
            } else {
                workers.setCorePoolSize(n);
                workers.setMaximumPoolSize(n);
            }
        }
    }

    /** @return worker threads held by open event streams (for tests) */
    int heldWorkers() {
        synchronized (poolLock) {
            return heldWorkers;
        }
    }

    private void allocate(HttpExchange ex) throws IOException {
        byte[] body = readBody(ex);
        GpuRequest request;
        try {
            request = parseRequest(body);
        } catch (GpuException | IllegalArgumentException e) {
            error(ex, 400, e.getMessage(), e instanceof GpuAllocationException g ? g.reason().name() : null);
            return;
        }
        long start = System.nanoTime();
        try {
            Allocation a = b.scheduler.allocate(request);
            schedulerMeters.recordAllocate(Duration.ofNanos(System.nanoTime() - start));
            watcher.pushStateIfChanged();
            ex.getResponseHeaders().set("Location", API + "/allocations/" + a.id());
            json(ex, 201, Views.allocation(a));
        } catch (GpuAllocationException e) {
            schedulerMeters.recordAllocate(Duration.ofNanos(System.nanoTime() - start));
            int status = e.reason() == GpuAllocationException.Reason.RATE_LIMITED ? 429
                    : e.reason() == GpuAllocationException.Reason.INVALID_REQUEST ? 400 : 409;
            error(ex, status, e.getMessage(), e.reason().name());
        }
    }

    /**
     * Parses a POST body: {@code {"flags": ["--gpu=2", "--gpu-memory=8GB"]}} (the CLI's flags), or
     * {@code {"resources": {"gpu_count": 2}}} (a workflow's resources).
     */
    static GpuRequest parseRequest(byte[] body) {
        JsonNode root;
        try {
            // strict: trailing content after the object and duplicate keys are errors, not silently ignored or
            // last-one-wins
            root = Views.MAPPER.reader()
                    .with(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                    .with(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
                    .readTree(body);
        } catch (IOException e) {
            String m = e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage();
            throw new IllegalArgumentException("request body is not JSON: " + m);
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException("request body must be a JSON object with \"flags\" (the CLI's"
                    + " request flags, e.g. [\"--gpu=2\"]) or \"resources\" (e.g. {\"gpu_count\": 2})");
        }
        List<String> keys = new ArrayList<>();
        root.fieldNames().forEachRemaining(keys::add);
        if (keys.size() != 1 || !(keys.contains("flags") || keys.contains("resources"))) {
            throw new IllegalArgumentException("request body must have exactly one of \"flags\" or \"resources\";"
                    + " got " + keys);
        }
        if (root.has("flags")) {
            JsonNode f = root.get("flags");
            if (!f.isArray()) {
                throw new IllegalArgumentException("\"flags\" must be an array of strings such as \"--gpu=2\"");
            }
            List<String> flags = new ArrayList<>();
            for (JsonNode n : f) {
                if (!n.isTextual()) {
                    throw new IllegalArgumentException("\"flags\" must be an array of strings; got " + n);
                }
                flags.add(n.asText());
            }
            return GpuRequests.fromCliFlags(flags);
        }
        JsonNode r = root.get("resources");
        if (!r.isObject()) {
            throw new IllegalArgumentException("\"resources\" must be an object such as {\"gpu_count\": 2}");
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> map = Views.MAPPER.convertValue(r, Map.class);
        return GpuRequests.fromResources(map).orElseThrow(() -> new IllegalArgumentException(
                "\"resources\" asks for no GPU (gpu_count missing or 0)"));
    }

    private void release(HttpExchange ex, String id) throws IOException {
        drain(ex);
        try {
            boolean released = b.scheduler.release(id);
            watcher.pushStateIfChanged();
            json(ex, 200, Map.of("id", id, "released", released));
        } catch (GpuAllocationException e) {
            error(ex, e.reason() == GpuAllocationException.Reason.UNKNOWN_ALLOCATION ? 404 : 409, e.getMessage(),
                    e.reason().name());
        } catch (GpuException | IllegalArgumentException e) {
            error(ex, 404, e.getMessage(), null);
        }
    }

    // ---------------------------------------------------------------------------------------------------- plumbing

    /** Thrown when a body exceeds the limit. */
    private static final class RequestTooLarge extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RequestTooLarge(String m) {
            super(m);
        }
    }

    private byte[] readBody(HttpExchange ex) throws IOException {
        String declared = ex.getRequestHeaders().getFirst("Content-Length");
        if (declared != null) {
            long n;
            try {
                n = Long.parseLong(declared.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad Content-Length " + declared);
            }
            if (n > b.maxBodyBytes) {
                throw new RequestTooLarge("request body of " + n + " bytes is over the limit of " + b.maxBodyBytes);
            }
        }
        try (InputStream in = ex.getRequestBody()) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            int r;
            while ((r = in.read(buf)) > 0) {
                out.write(buf, 0, r);
                if (out.size() > b.maxBodyBytes) {
                    throw new RequestTooLarge("request body is over the limit of " + b.maxBodyBytes + " bytes");
                }
            }
            return out.toByteArray();
        }
    }

    private void drain(HttpExchange ex) {
        try (InputStream in = ex.getRequestBody()) {
            byte[] buf = new byte[8192];
            long left = b.maxBodyBytes;
            int r;
            while (left > 0 && (r = in.read(buf, 0, (int) Math.min(buf.length, left))) > 0) {
                left -= r;
            }
        } catch (IOException ignored) {
            // the client went away
        }
    }

    /**
     * @param keys the parameters read (others are ignored, as before)
     * @return each of {@code keys} given, decoded
     * @throws BadQuery when one of {@code keys} is given more than once (an ambiguous query is not resolved to its
     *     first or last value)
     */
    static Map<String, String> query(HttpExchange ex, String... keys) {
        Map<String, String> out = new LinkedHashMap<>();
        String q = ex.getRequestURI().getRawQuery();
        if (q == null || q.isEmpty()) {
            return out;
        }
        List<String> wanted = List.of(keys);
        for (String kv : q.split("&", -1)) {
            int i = kv.indexOf('=');
            String key = URLDecoder.decode(i < 0 ? kv : kv.substring(0, i), StandardCharsets.UTF_8);
            if (!wanted.contains(key)) {
                continue;
            }
            String value = i < 0 ? "" : URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8);
            if (out.putIfAbsent(key, value) != null) {
                throw new BadQuery("query parameter " + key + " is given more than once; give it once");
            }
        }
        return out;
    }

    /** @return a device index of this node, from ASCII digits only (no sign, no other Unicode digit, no space) */
    private int parseIndex(String s) {
        List<Integer> valid = b.inventory.devices().stream().map(d -> d.index()).sorted().toList();
        boolean digits = !s.isEmpty() && s.length() <= 10 && s.chars().allMatch(c -> c >= '0' && c <= '9');
        long n = digits ? Long.parseLong(s) : -1;
        if (!digits || n > Integer.MAX_VALUE || !valid.contains((int) n)) {
            throw new BadQuery("gpu=" + SampleHistory.printable(s) + " is not a device index of this node; its GPUs"
                    + " are " + (valid.isEmpty() ? "none" : valid.toString()));
        }
        return (int) n;
    }

    private static Duration parseWindow(String s) {
        try {
            return SampleHistory.parseWindow(s);
        } catch (IllegalArgumentException e) {
            throw new BadQuery(e.getMessage());
        }
    }

    private static final class BadQuery extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        BadQuery(String m) {
            super(m);
        }
    }

    private void asset(HttpExchange ex, String method, String name, String type) throws IOException {
        get(ex, method, () -> {
            try (InputStream in = ConsoleServer.class.getResourceAsStream("web/" + name)) {
                if (in == null) {
                    error(ex, 404, "missing asset " + name, null);
                    return;
                }
                byte[] bytes = in.readAllBytes();
                ex.getResponseHeaders().set("Content-Type", type);
                ex.getResponseHeaders().set("Cache-Control", "no-cache");
                if (name.equals("index.html")) {
                    ex.getResponseHeaders().set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:;"
                            + " style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
                }
                send(ex, 200, bytes);
            }
        });
    }

    private void json(HttpExchange ex, int status, Object body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.getResponseHeaders().set("Cache-Control", "no-store");
        send(ex, status, Views.json(body).getBytes(StandardCharsets.UTF_8));
    }

    private void text(HttpExchange ex, int status, String body, String type) throws IOException {
        ex.getResponseHeaders().set("Content-Type", type);
        send(ex, status, body.getBytes(StandardCharsets.UTF_8));
    }

    private void error(HttpExchange ex, int status, String message, String reason) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", status);
        m.put("error", message);
        if (reason != null) {
            m.put("reason", reason);
        }
        try {
            json(ex, status, m);
        } catch (IOException | RuntimeException e) {
            LOG.debug("cannot send error {}: {}", status, e.toString());
        }
    }

    private static void send(HttpExchange ex, int status, byte[] bytes) throws IOException {
        boolean head = ex.getRequestMethod().equals("HEAD");
        ex.sendResponseHeaders(status, head ? -1 : bytes.length == 0 ? -1 : bytes.length);
        if (!head && bytes.length > 0) {
            ex.getResponseBody().write(bytes);
        }
    }

    private static String hostname() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return Optional.ofNullable(System.getenv("HOSTNAME")).orElse("localhost");
        }
    }

    private static java.util.concurrent.ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** Builds a {@link ConsoleServer}. */
    public static final class Builder {
        private GpuScheduler scheduler;
        private GpuInventory inventory;
        private Path stateDir;
        private InetSocketAddress listen = new InetSocketAddress(InetAddress.getLoopbackAddress(), 9400);
        private boolean allowRemote;
        private Runnable refresh = () -> { };
        private Duration sampleInterval = Duration.ofSeconds(1);
        private int maxBodyBytes = 16 * 1024;
        private int maxSseClients = 1024;
        private int threads = 256;
        private Clock clock = Clock.systemUTC();
        private List<Path> cudaPaths = List.of();
        private boolean ticking = true;
        private Duration eventStall = Duration.ofSeconds(30);
        private List<String> allowedHosts = List.of();

        private Builder() {
        }

        /** @param v the node's scheduler (required) @return this */
        public Builder scheduler(GpuScheduler v) {
            scheduler = Objects.requireNonNull(v);
            return this;
        }

        /** @param v the node's inventory (required) @return this */
        public Builder inventory(GpuInventory v) {
            inventory = Objects.requireNonNull(v);
            return this;
        }

        /** @param v the state directory, where the token file lives (required) @return this */
        public Builder stateDir(Path v) {
            stateDir = Objects.requireNonNull(v);
            return this;
        }

        /** @param v address and port to listen on (default 127.0.0.1:9400; port 0 picks one) @return this */
        public Builder listen(InetSocketAddress v) {
            listen = Objects.requireNonNull(v);
            return this;
        }

        /** @param v whether a non-loopback listen address is allowed (default false) @return this */
        public Builder allowRemote(boolean v) {
            allowRemote = v;
            return this;
        }

        /**
         * @param v more Host names the console answers to (e.g. the node's DNS name when it listens beyond loopback,
         *     or a name an SSH tunnel uses); a name, no port, no scheme. Loopback names are always accepted. See
         *     the Host rule in the class comment
         * @return this
         * @throws IllegalArgumentException when a name is empty or holds a character a host name cannot hold
         */
        public Builder allowedHosts(List<String> v) {
            List<String> out = new ArrayList<>();
            for (String h : v) {
                if (h == null || h.isEmpty() || h.length() > 253 || !h.chars().allMatch(c -> c >= 'a' && c <= 'z'
                        || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_')) {
                    throw new IllegalArgumentException("--allowed-host \"" + (h == null ? "null"
                            : SampleHistory.printable(h)) + "\" is not a host name (letters, digits, '-', '.', '_';"
                            + " no port, no scheme)");
                }
                out.add(h.toLowerCase(java.util.Locale.ROOT));
            }
            allowedHosts = List.copyOf(out);
            return this;
        }

        /** @param v run on each tick before sampling, to catch up with other processes (e.g. scheduler::refresh) @return this */
        public Builder refresh(Runnable v) {
            refresh = Objects.requireNonNull(v);
            return this;
        }

        /**
         * @param v how often GPUs are sampled and changes pushed (default 1 s; at least {@link ConsoleServer#MIN_SAMPLE_INTERVAL}).
         *     Faster than 100 ms, the ten-minute history keeps one point per 100 ms (the latest in each), so its
         *     memory stays at 6,001 points per GPU
         * @return this
         * @throws IllegalArgumentException when {@code v} is under one millisecond
         */
        public Builder sampleInterval(Duration v) {
            if (v.compareTo(MIN_SAMPLE_INTERVAL) < 0) {
                throw new IllegalArgumentException("sample interval " + v + " is under the minimum of "
                        + MIN_SAMPLE_INTERVAL.toMillis() + " ms (use --interval 1ms or more)");
            }
            sampleInterval = v;
            return this;
        }

        /** @param v largest accepted request body (default 16 KiB) @return this */
        public Builder maxBodyBytes(int v) {
            maxBodyBytes = v;
            return this;
        }

        /** @param v most event-stream clients at once (default 1024) @return this */
        public Builder maxSseClients(int v) {
            maxSseClients = v;
            return this;
        }

        /**
         * @param v most HTTP worker threads, started on demand (default 256); a client that never finishes its request
         *     holds one until the JDK's request time limit cuts it (see the class comment). Each open event stream
         *     holds a thread of its own for its life, on top of these (so at most {@code v + maxSseClients})
         * @return this
         */
        public Builder threads(int v) {
            threads = v;
            return this;
        }

        /** @param v clock for sample times @return this */
        public Builder clock(Clock v) {
            clock = Objects.requireNonNull(v);
            return this;
        }

        /** @param v how long one event-stream write may block before its client is dropped (tests) @return this */
        Builder eventStall(Duration v) {
            eventStall = Objects.requireNonNull(v);
            return this;
        }

        /** @param v false: no sampling thread; a test calls {@code watcher().tick()} itself @return this */
        Builder ticking(boolean v) {
            ticking = v;
            return this;
        }

        /** @param v more CUDA locations for the doctor view @return this */
        public Builder cudaPaths(List<Path> v) {
            cudaPaths = List.copyOf(v);
            return this;
        }

        /**
         * @return the server, not yet listening
         * @throws IllegalStateException when the token file is unsafe (see {@link ApiToken#loadOrCreate})
         */
        public ConsoleServer build() {
            Objects.requireNonNull(scheduler, "scheduler");
            Objects.requireNonNull(inventory, "inventory");
            Objects.requireNonNull(stateDir, "stateDir");
            return new ConsoleServer(this);
        }
    }
}
