package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpContext;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
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
 * the scheduler and the inventory. The console registers its allocation listener on the scheduler when built and
 * removes it on {@link #close()}.
 *
 * <p>Where things are: this class holds the builder, start/close and the route table. The JDK server has one context
 * with three {@link Filter}s, outermost first: {@link ExchangeFilter} (common headers, exceptions to JSON errors),
 * {@link HostFilter} (the Host rule) and {@link BearerAuthFilter}; then each path goes to its route group's handler:
 * {@link AssetHandler} (the page, the OpenAPI document), {@link NodeViewsHandler}, {@link EventsHandler},
 * {@link AllocationsHandler}, and {@code /metrics} to {@link ConsoleMeters}. {@link Exchanges} is the plumbing they
 * share.
 *
 * <p>Why it is over 500 lines: the class comment and the builder's documented, checked settings; the routes,
 * filters, plumbing and meters are in their own types.
 */
public final class ConsoleServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConsoleServer.class);
    static final String API = "/api/v1";
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
    private final ConsoleMeters meters;
    private final SseHub sse;
    private final NodeWatcher watcher;
    private final ConsoleWorkers workers;
    private final ScheduledExecutorService ticker;
    private final AllocationListener listener = this::onEvent;
    /** The route table: every path served, each to its route group's handler. */
    private final Map<String, HttpHandler> routes = new LinkedHashMap<>();
    /** Which of {@link #routes} are API paths (named by the OpenAPI document), in order. */
    private final Map<String, Boolean> apiPaths = new LinkedHashMap<>();
    private final AllocationsHandler allocations;
    /** the node's accounting sampler, when this console is it (empty: another process is, or accounting is off) */
    private final Optional<AccountingSampler> sampler;
    /** On the one context, outermost first: errors and headers, the Host rule, bearer auth. */
    private final List<Filter> routeFilters;
    private HttpServer server;

    private ConsoleServer(Builder b) {
        this.b = b;
        this.token = ApiToken.loadOrCreate(b.stateDir);
        String hostname = hostname();
        this.workers = new ConsoleWorkers(b.threads);
        this.ticker = Executors.newSingleThreadScheduledExecutor(ConsoleWorkers.daemon("gpusched-console-tick"));
        this.sse = new SseHub(b.maxSseClients, b.eventStall.toNanos(), ConsoleWorkers.daemon("gpusched-console-sse"));
        this.watcher = new NodeWatcher(b.scheduler, b.scheduler.inventory(), b.refresh, sse, b.clock,
                b.sampleInterval, HISTORY);
        this.meters = new ConsoleMeters(b.scheduler, hostname, sse);
        this.allocations = new AllocationsHandler(b.scheduler, watcher, meters, b.maxBodyBytes);
        NodeViewsHandler views = new NodeViewsHandler(b.scheduler, watcher, sse, hostname, b.stateDir, b.cudaPaths,
                VERSION);
        AssetHandler page = AssetHandler.page();
        for (String p : page.paths()) {
            route(p, page, false);
        }
        route("/metrics", ex -> Exchanges.get(ex, () -> Exchanges.text(ex, 200, meters.scrape(),
                ConsoleMeters.SCRAPE_TYPE)), true);
        AssetHandler openApi = AssetHandler.openApi(API + "/openapi.json");
        for (String p : openApi.paths()) {
            route(p, openApi, true);
        }
        for (String p : NodeViewsHandler.paths()) {
            route(p, views, true);
        }
        route(EventsHandler.PATH, new EventsHandler(sse, watcher, workers, b.maxSseClients), true);
        route(AllocationsHandler.PATH, allocations, true);
        AccountingStore store = AccountingStore.at(b.stateDir);
        UsageHandler usage = new UsageHandler(store, b.clock);
        for (String p : UsageHandler.paths()) {
            route(p, usage, true);
        }
        this.sampler = openSampler(b, store);
        routeFilters = List.of(new ExchangeFilter(),
                new HostFilter(!b.listen.getAddress().isLoopbackAddress(), b.allowedHosts, hostname, b.maxBodyBytes),
                new BearerAuthFilter(token, b.maxBodyBytes));
        b.scheduler.addListener(listener);
    }

    /** Opens the node's accounting sampler on this console's sweeps, unless another process samples the node. */
    private Optional<AccountingSampler> openSampler(Builder b, AccountingStore store) {
        if (!b.accounting.enabled()) {
            return Optional.empty();
        }
        UsageMeters usageMeters = new UsageMeters(meters.registry());
        Optional<AccountingSampler> s = AccountingSampler.open(store, b.accounting, b.scheduler.inventory(), null,
                new HostIdleEffects(b.scheduler).listener(watcher::onIdle), b.clock);
        s.ifPresent(x -> {
            x.addIntervalListener(usageMeters::onInterval);
            b.scheduler.addListener(x);
            watcher.feedSweeps(sample -> x.sweep(sample, b.scheduler.allocations()));
        });
        return s;
    }

    /** @return the accounting sampler, when this console is the node's (for tests) */
    Optional<AccountingSampler> sampler() {
        return sampler;
    }

    private void route(String path, HttpHandler handler, boolean api) {
        routes.put(path, handler);
        apiPaths.put(path, api);
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Feeds the console an allocation event (audit stream, refusal counts). The console registers itself on its
     * scheduler ({@link GpuScheduler#addListener}) when built and goes away on {@link #close()}, so hosts do not call
     * this.
     */
    void onEvent(AllocationEvent event) {
        meters.onEvent(event);
        watcher.onEvent(event);
    }

    /**
     * Binds the socket and starts serving.
     *
     * @return this
     * @throws UncheckedIOException when the address cannot be bound
     */
    public ConsoleServer start() {
        InetSocketAddress listen = b.listen;
        applyJdkRequestTimeLimit();
        try {
            server = HttpServer.create(listen, 256);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on " + listen + ": " + e.getMessage(), e);
        }
        try {
            server.setExecutor(workers);
            HttpContext context = server.createContext("/", this::dispatch);
            context.getFilters().addAll(routeFilters);
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
        return meters.registry();
    }

    /** @return how many event-stream clients are connected */
    public int eventClients() {
        return sse.size();
    }

    /** @return this build's version, as {@code /api/v1/node} reports it (from the build, not a literal) */
    public static String version() {
        return VERSION;
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

    /** @return worker threads held by open event streams (for tests) */
    int heldWorkers() {
        return workers.held();
    }

    @Override
    public void close() {
        b.scheduler.removeListener(listener);
        ticker.shutdownNow();
        sampler.ifPresent(s -> {
            b.scheduler.removeListener(s);
            s.close();
        });
        sse.close();
        if (server != null) {
            server.stop(0);
        }
        workers.shutdownNow();
        meters.close();
    }

    // ---------------------------------------------------------------------------------------------------- routing

    /** @return every path this server answers, the API's as its OpenAPI document spells them (for tests) */
    Map<String, Boolean> servedPaths() {
        Map<String, Boolean> m = new LinkedHashMap<>(apiPaths);
        m.put(AllocationsHandler.PREFIX + "{id}", true);
        return m;
    }

    /** Routes a request that passed the filters: exact paths from the table, then allocations by id, else 404. */
    private void dispatch(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        HttpHandler h = routes.get(path);
        if (h == null && path.startsWith(AllocationsHandler.PREFIX)) {
            h = allocations;
        }
        if (h != null) {
            h.handle(ex);
        } else {
            Exchanges.error(ex, 404, "no such resource: " + path + " (see " + API + "/openapi.json)", null);
        }
    }

    private static String hostname() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return Optional.ofNullable(System.getenv("HOSTNAME")).orElse("localhost");
        }
    }

    private static final String VERSION = readVersion();

    /** @return the version Maven wrote into {@code console.properties} when it built this jar */
    private static String readVersion() {
        Properties p = new Properties();
        try (InputStream in = ConsoleServer.class.getResourceAsStream("console.properties")) {
            if (in != null) {
                p.load(in);
            }
        } catch (IOException e) {
            LOG.debug("cannot read console.properties: {}", e.toString());
        }
        String v = p.getProperty("version", "");
        return v.isEmpty() || v.startsWith("${") ? "unknown" : v;
    }

    /**
     * Builds a {@link ConsoleServer}. Only the scheduler is required: the inventory, the refresh and the state
     * directory come from it. Each setter checks its argument at once (an {@link IllegalArgumentException} naming the
     * value and what is valid), then refuses being called twice ({@link IllegalStateException}); options that
     * conflict are refused by {@link #build()}.
     */
    public static final class Builder {
        private GpuScheduler scheduler;
        private GpuInventory inventory;
        private Path stateDir;
        private InetSocketAddress listen;
        private Boolean allowRemote;
        private Runnable refresh;
        private Duration sampleInterval;
        private Integer maxBodyBytes;
        private Integer maxSseClients;
        private Integer threads;
        private Clock clock;
        private List<Path> cudaPaths;
        private Boolean ticking;
        private Duration eventStall;
        private List<String> allowedHosts;
        private AccountingSettings accounting;

        private Builder() {
        }

        private static void unset(Object current, String what) {
            if (current != null) {
                throw new IllegalStateException(what + " was already set");
            }
        }

        private static int positive(int v, String what) {
            if (v < 1) {
                throw new IllegalArgumentException(what + " must be at least 1, was " + v);
            }
            return v;
        }

        /** @param v the node's scheduler (required) @return this */
        public Builder scheduler(GpuScheduler v) {
            unset(scheduler, "scheduler");
            scheduler = Objects.requireNonNull(v, "scheduler");
            return this;
        }

        /**
         * @param v the node's inventory; optional, the scheduler's ({@link GpuScheduler#inventory()}) by default, and
         *     when given it must be that one
         * @return this
         */
        public Builder inventory(GpuInventory v) {
            unset(inventory, "inventory");
            inventory = Objects.requireNonNull(v, "inventory");
            return this;
        }

        /**
         * @param v the state directory, where the token file lives; default the scheduler's
         *     ({@link GpuScheduler#stateDir()}), required for a scheduler that has none
         * @return this
         */
        public Builder stateDir(Path v) {
            unset(stateDir, "state directory");
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /** @param v address and port to listen on (default 127.0.0.1:9400; port 0 picks one) @return this */
        public Builder listen(InetSocketAddress v) {
            unset(listen, "listen address");
            Objects.requireNonNull(v, "listen");
            if (v.isUnresolved()) {
                throw new IllegalArgumentException("listen address " + v + " is unresolved; give an IP address or a"
                        + " name this host resolves");
            }
            listen = v;
            return this;
        }

        /** @param v whether a non-loopback listen address is allowed (default false) @return this */
        public Builder allowRemote(boolean v) {
            unset(allowRemote, "allowRemote");
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
            unset(allowedHosts, "allowed hosts");
            List<String> out = new ArrayList<>();
            for (String h : v) {
                if (h == null || h.isEmpty() || h.length() > 253 || !h.chars().allMatch(c -> c >= 'a' && c <= 'z'
                        || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_')) {
                    throw new IllegalArgumentException("--allowed-host \"" + (h == null ? "null"
                            : SampleHistory.printable(h)) + "\" is not a host name (letters, digits, '-', '.', '_';"
                            + " no port, no scheme)");
                }
                out.add(h.toLowerCase(Locale.ROOT));
            }
            allowedHosts = List.copyOf(out);
            return this;
        }

        /**
         * @param v run on each tick before sampling, to catch up with other processes; default
         *     {@link GpuScheduler#refresh()} of the scheduler
         * @return this
         */
        public Builder refresh(Runnable v) {
            unset(refresh, "refresh");
            refresh = Objects.requireNonNull(v, "refresh");
            return this;
        }

        /**
         * @param v how often GPUs are sampled and changes pushed (default 1 s; at least
         *     {@link ConsoleServer#MIN_SAMPLE_INTERVAL}). Faster than 100 ms, the ten-minute history keeps one point
         *     per 100 ms (the latest in each), so its memory stays at 6,001 points per GPU
         * @return this
         * @throws IllegalArgumentException when {@code v} is under one millisecond
         */
        public Builder sampleInterval(Duration v) {
            if (v.compareTo(MIN_SAMPLE_INTERVAL) < 0) {
                throw new IllegalArgumentException("sample interval " + v + " is under the minimum of "
                        + MIN_SAMPLE_INTERVAL.toMillis() + " ms (use --interval 1ms or more)");
            }
            unset(sampleInterval, "sample interval");
            sampleInterval = v;
            return this;
        }

        /** @param v largest accepted request body in bytes, at least 1 (default 16 KiB) @return this */
        public Builder maxBodyBytes(int v) {
            int checked = positive(v, "max body bytes");
            unset(maxBodyBytes, "max body bytes");
            maxBodyBytes = checked;
            return this;
        }

        /** @param v most event-stream clients at once, at least 1 (default 1024) @return this */
        public Builder maxSseClients(int v) {
            int checked = positive(v, "max event-stream clients");
            unset(maxSseClients, "max event-stream clients");
            maxSseClients = checked;
            return this;
        }

        /**
         * @param v most HTTP worker threads, at least 1, started on demand (default 256); a client that never
         *     finishes its request holds one until the JDK's request time limit cuts it (see the class comment).
         *     Each open event stream holds a thread of its own for its life, on top of these (so at most
         *     {@code v + maxSseClients})
         * @return this
         */
        public Builder threads(int v) {
            int checked = positive(v, "threads");
            unset(threads, "threads");
            threads = checked;
            return this;
        }

        /** @param v clock for sample times (default the system UTC clock) @return this */
        public Builder clock(Clock v) {
            unset(clock, "clock");
            clock = Objects.requireNonNull(v, "clock");
            return this;
        }

        /** @param v how long one event-stream write may block before its client is dropped (tests) @return this */
        Builder eventStall(Duration v) {
            unset(eventStall, "event stall");
            eventStall = Objects.requireNonNull(v, "eventStall");
            return this;
        }

        /** @param v false: no sampling thread; a test calls {@code watcher().tick()} itself @return this */
        Builder ticking(boolean v) {
            unset(ticking, "ticking");
            ticking = v;
            return this;
        }

        /**
         * @param v {@code gpu.accounting} and {@code gpu.idle} (default {@link AccountingSettings#defaults()}): the
         *     console is the node's accounting sampler (its ticks feed it) unless another process is, or accounting
         *     is off
         * @return this
         */
        public Builder accounting(AccountingSettings v) {
            unset(accounting, "accounting settings");
            accounting = Objects.requireNonNull(v, "accounting");
            return this;
        }

        /** @param v more CUDA locations for the doctor view @return this */
        public Builder cudaPaths(List<Path> v) {
            unset(cudaPaths, "CUDA paths");
            cudaPaths = List.copyOf(v);
            return this;
        }

        /**
         * @return the server, not yet listening
         * @throws IllegalStateException when no scheduler was given, when neither this builder nor the scheduler
         *     names a state directory, or when the token file is unsafe (see {@link ApiToken#loadOrCreate})
         * @throws IllegalArgumentException when the inventory given is not the scheduler's, or the listen address is
         *     beyond loopback without {@link #allowRemote}
         */
        public ConsoleServer build() {
            if (scheduler == null) {
                throw new IllegalStateException("a ConsoleServer needs a scheduler: builder().scheduler(...)");
            }
            if (inventory != null && inventory != scheduler.inventory()) {
                throw new IllegalArgumentException("inventory " + inventory.backend() + " is not the scheduler's ("
                        + scheduler.inventory().backend() + "); leave it out, the console reads the scheduler's");
            }
            if (stateDir == null) {
                stateDir = scheduler.stateDir().orElseThrow(() -> new IllegalStateException("the scheduler keeps its"
                        + " state in memory only, so the console needs a state directory for its token:"
                        + " builder().stateDir(...)"));
            }
            listen = listen != null ? listen : new InetSocketAddress(InetAddress.getLoopbackAddress(), 9400);
            allowRemote = allowRemote != null && allowRemote;
            if (!listen.getAddress().isLoopbackAddress() && !allowRemote) {
                throw new IllegalArgumentException("--listen " + listen.getAddress().getHostAddress() + " is not a"
                        + " loopback address; the console listens beyond this host only when asked (--allow-remote),"
                        + " and then every request needs the bearer token");
            }
            GpuScheduler s = scheduler;
            refresh = refresh != null ? refresh : s::refresh;
            sampleInterval = sampleInterval != null ? sampleInterval : Duration.ofSeconds(1);
            maxBodyBytes = maxBodyBytes != null ? maxBodyBytes : 16 * 1024;
            maxSseClients = maxSseClients != null ? maxSseClients : 1024;
            threads = threads != null ? threads : 256;
            clock = clock != null ? clock : Clock.systemUTC();
            cudaPaths = cudaPaths != null ? cudaPaths : List.of();
            ticking = ticking == null || ticking;
            eventStall = eventStall != null ? eventStall : Duration.ofSeconds(30);
            allowedHosts = allowedHosts != null ? allowedHosts : List.of();
            accounting = accounting != null ? accounting : AccountingSettings.defaults();
            return new ConsoleServer(this);
        }
    }
}
