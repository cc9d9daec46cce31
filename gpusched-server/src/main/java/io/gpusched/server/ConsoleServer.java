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
 * apply. A request must arrive whole within 10 s and its headers within 64 KiB (the JDK server's JVM-wide
 * {@code sun.net.httpserver.maxReqTime} and {@code maxReqHeaderSize}, set when this class loads unless the host set
 * them), so clients that never finish a request cannot hold the workers.
 *
 * <p>Start it with {@link #builder()}, then {@link #start()}; {@link #close()} stops it. The caller keeps ownership of
 * the scheduler and the inventory.
 */
public final class ConsoleServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConsoleServer.class);
    private static final String API = "/api/v1";

    /**
     * Bounds on the JDK server, which otherwise lets a client that never finishes its request (headers or body) hold a
     * worker thread forever, so that a few such clients starve everyone (slowloris). These are JVM-wide system
     * properties read once when the JDK's server first loads; a value the host already set is kept.
     */
    static final Map<String, String> JDK_SERVER_LIMITS = Map.of(
            "sun.net.httpserver.maxReqTime", "10", // seconds to receive a whole request
            "sun.net.httpserver.maxReqHeaderSize", Integer.toString(64 * 1024)); // bytes of request headers

    static {
        JDK_SERVER_LIMITS.forEach((k, v) -> {
            if (System.getProperty(k) == null) {
                System.setProperty(k, v);
            }
        });
    }

    private final Builder b;
    private final ApiToken token;
    private final PrometheusMeterRegistry registry;
    private final SchedulerMeterBinder schedulerMeters;
    private final SseHub sse;
    private final NodeWatcher watcher;
    private final ThreadPoolExecutor workers;
    private final ExecutorService sseWriters;
    private final ScheduledExecutorService ticker;
    private final String hostname;
    private HttpServer server;

    private ConsoleServer(Builder b) {
        this.b = b;
        this.token = ApiToken.loadOrCreate(b.stateDir);
        this.hostname = hostname();
        // threads start on demand and end after 30 s idle: a client that stalls mid-request holds one worker until
        // the JDK server's request time limit cuts it (JDK_SERVER_LIMITS), so many workers keep others served
        this.workers = new ThreadPoolExecutor(b.threads, b.threads, 30, TimeUnit.SECONDS,
                new ArrayBlockingQueue<>(4096), daemon("gpusched-console-http"),
                new ThreadPoolExecutor.AbortPolicy());
        workers.allowCoreThreadTimeOut(true);
        this.sseWriters = Executors.newFixedThreadPool(4, daemon("gpusched-console-sse"));
        this.ticker = Executors.newSingleThreadScheduledExecutor(daemon("gpusched-console-tick"));
        this.sse = new SseHub(sseWriters, b.maxSseClients);
        this.watcher = new NodeWatcher(b.scheduler, b.inventory, b.refresh, sse, b.clock, b.sampleInterval,
                Duration.ofMinutes(10));
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config().namingConvention(DcgmMeterBinder.namingConvention());
        new DcgmMeterBinder(b.scheduler::devices, hostname).bindTo(registry);
        this.schedulerMeters = new SchedulerMeterBinder(b.scheduler);
        schedulerMeters.bindTo(registry);
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
        try {
            server = HttpServer.create(listen, 256);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on " + listen + ": " + e.getMessage(), e);
        }
        server.setExecutor(workers);
        server.createContext("/", this::dispatch);
        server.start();
        ticker.scheduleWithFixedDelay(watcher::tick, 0, b.sampleInterval.toMillis(), TimeUnit.MILLISECONDS);
        ticker.scheduleWithFixedDelay(sse::heartbeat, 15, 15, TimeUnit.SECONDS);
        LOG.info("gpusched console on {}/ (token in {})", url(), token.file());
        return this;
    }

    /** @return the bound address (the port is real when 0 was asked for) */
    public InetSocketAddress address() {
        InetSocketAddress a = server.getAddress();
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

    @Override
    public void close() {
        ticker.shutdownNow();
        sse.close();
        if (server != null) {
            server.stop(0);
        }
        workers.shutdownNow();
        sseWriters.shutdownNow();
        registry.close();
    }

    // ---------------------------------------------------------------------------------------------------- routing

    private void dispatch(HttpExchange ex) throws IOException {
        try {
            ex.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
            ex.getResponseHeaders().set("Referrer-Policy", "no-referrer");
            String method = ex.getRequestMethod();
            String path = ex.getRequestURI().getRawPath();
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

    private void route(HttpExchange ex, String method, String path) throws IOException {
        switch (path) {
            case "/", "/index.html" -> asset(ex, method, "index.html", "text/html; charset=utf-8");
            case "/app.js" -> asset(ex, method, "app.js", "text/javascript; charset=utf-8");
            case "/app.css" -> asset(ex, method, "app.css", "text/css; charset=utf-8");
            case "/favicon.svg" -> asset(ex, method, "favicon.svg", "image/svg+xml");
            case "/metrics" -> get(ex, method, () -> text(ex, 200, registry.scrape(),
                    "text/plain; version=0.0.4; charset=utf-8"));
            case API + "/openapi.json" -> asset(ex, method, "openapi.json", "application/json");
            case API + "/node" -> get(ex, method, () -> json(ex, 200, node()));
            case API + "/devices" -> get(ex, method, () -> json(ex, 200, watcher.state().get("devices")));
            case API + "/topology" -> get(ex, method, () -> json(ex, 200, topology()));
            case API + "/samples" -> get(ex, method, () -> json(ex, 200, watcher.samples(query(ex, "gpu")
                    .map(ConsoleServer::parseIndex))));
            case API + "/doctor" -> get(ex, method, () -> json(ex, 200, DoctorReport.collect(b.cudaPaths)));
            case API + "/audit" -> get(ex, method, () -> json(ex, 200, watcher.recentAudit()));
            case API + "/events" -> get(ex, method, () -> events(ex));
            case API + "/allocations" -> {
                if (method.equals("POST")) {
                    allocate(ex);
                } else {
                    get(ex, method, () -> json(ex, 200, watcher.state().get("allocations")));
                }
            }
            default -> {
                if (path.startsWith(API + "/allocations/")) {
                    String id = URLDecoder.decode(path.substring((API + "/allocations/").length()),
                            StandardCharsets.UTF_8);
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

    private void events(HttpExchange ex) throws IOException {
        if (!sse.open(ex, "state", Views.json(watcher.state()))) {
            error(ex, 503, "too many event-stream clients (" + b.maxSseClients + ")", null);
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

    private static Optional<String> query(HttpExchange ex, String key) {
        String q = ex.getRequestURI().getRawQuery();
        if (q == null) {
            return Optional.empty();
        }
        for (String kv : q.split("&")) {
            int i = kv.indexOf('=');
            if (i > 0 && kv.substring(0, i).equals(key)) {
                return Optional.of(URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8));
            }
        }
        return Optional.empty();
    }

    private static int parseIndex(String s) {
        try {
            return Integer.parseInt(s);
        } catch (NumberFormatException e) {
            throw new BadQuery("gpu=" + s + " is not a device index");
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

        /** @param v run on each tick before sampling, to catch up with other processes (e.g. scheduler::refresh) @return this */
        public Builder refresh(Runnable v) {
            refresh = Objects.requireNonNull(v);
            return this;
        }

        /** @param v how often GPUs are sampled and changes pushed (default 1 s) @return this */
        public Builder sampleInterval(Duration v) {
            if (v.isNegative() || v.isZero()) {
                throw new IllegalArgumentException("sample interval must be positive: " + v);
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
         *     holds one for at most the 10 s request time limit
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
