package io.gpusched.server;

import com.sun.net.httpserver.Filter;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.accounting.AccountingSampler;
import io.gpusched.accounting.AccountingSettings;
import io.gpusched.accounting.AccountingStore;
import io.gpusched.accounting.HostIdleEffects;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.ProcessAttribution;
import io.gpusched.core.host.StateDirectory;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node console: a web page, a JSON REST API under {@code /api/v1} with server-sent events, an OpenAPI document
 * and Prometheus {@code /metrics}. Its routes are JDK {@code com.sun.net.httpserver} handlers and filters, served by
 * Jetty 12 through {@code jetty-http-spi}: on TCP (the console) and, when asked ({@link Builder#unixSocket}), on a
 * Unix socket, the node service's, with one route table and one JSON for both.
 *
 * <p>Security on TCP: it listens on loopback unless told otherwise ({@link Builder#allowRemote}); reads are open to
 * loopback clients only (others need the token too); every change (POST, DELETE) needs {@code Authorization: Bearer
 * <token>} with the token from {@link ApiToken} in the state directory ({@link Caller#consoleToken()}). No cookies are
 * read, so there is no CSRF. Request bodies are capped ({@link Builder#maxBodyBytes}); allocations go through the
 * scheduler, so the ledger's rate limits apply.
 *
 * <p>On the Unix socket the caller is the connection's peer, as the kernel says ({@code SO_PEERCRED}, read once when
 * the connection is accepted), with names from NSS: a {@link Caller} every handler reads with
 * {@link Caller#of(HttpExchange)}. Neither the Host rule nor the token applies there. Routes a host adds
 * ({@link Builder#route}) decide what each caller may do; the console's own changes (allocate, release) on the
 * socket are for admins only ({@code 403 FORBIDDEN} otherwise), so a socket served without the node service's routes
 * gives no one rights over others' allocations.
 *
 * <p>Host rule on TCP (DNS rebinding: a page whose name is re-pointed at 127.0.0.1 makes a local browser a loopback
 * client, but its requests still carry its own name in {@code Host}): every request, on every path (page, assets,
 * REST, events, metrics), is refused with 421 and a JSON error naming the Host and what is accepted unless its Host,
 * with any port, is {@code localhost}, an IPv4 literal in 127.0.0.0/8, {@code [::1]}, or a name given to
 * {@link Builder#allowedHosts} ({@code --allowed-host}); when listening beyond loopback, also any IP literal (a literal
 * cannot be re-pointed) and this host's name. The port is not compared (an SSH tunnel's local port differs; a
 * rebinding page is refused by its name). A request without Host is accepted on HTTP/1.0 only (400 on HTTP/1.1), and
 * two Host headers are 400.
 *
 * <p>Limits: the body limit is this class's (a bounded read; a declared or streamed body over it is 413). Jetty
 * parses requests without a thread per connection, so a client that stalls mid-request holds a connection, not a
 * worker, and a connection silent for {@link Builder#idleTimeout} (default 10 s) is closed, also mid-request. Request
 * headers are limited to Jetty's 8 KiB (431). Event-stream clients that do not read are dropped (see
 * {@link #eventClients()}). None of this sets a JVM-wide property.
 *
 * <p>Start it with {@link #builder()}, then {@link #start()}; {@link #close()} stops it. The caller keeps ownership of
 * the scheduler and the inventory. The console registers its allocation listener on the scheduler when built and
 * removes it on {@link #close()}.
 *
 * <p>Where things are: this class holds the builder, start/close and the route table; {@link JettyTransport} the
 * Jetty server and its connectors, {@link UnixSocketFile} the socket file. One context with four {@link Filter}s,
 * outermost first: {@link ExchangeFilter} (common headers, exceptions to JSON errors), {@link IdentityFilter} (the
 * caller), {@link HostFilter} (the Host rule, TCP) and {@link BearerAuthFilter} (TCP); then each path goes to a host's
 * route ({@link Builder#route}) or to its route group's handler: {@link AssetHandler} (the page, the OpenAPI
 * document), {@link NodeViewsHandler}, {@link EventsHandler}, {@link AllocationsHandler}, and {@code /metrics} to
 * {@link ConsoleMeters}. {@link Exchanges} is the plumbing they share.
 *
 * <p>Why it is over 500 lines: the class comment and the builder's documented, checked settings; the routes,
 * filters, plumbing, transport and meters are in their own types.
 */
public final class ConsoleServer implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConsoleServer.class);
    static final String API = "/api/v1";
    /** How far back the per-GPU sample history reaches (served by /api/v1/samples, drawn as sparklines). */
    static final Duration HISTORY = Duration.ofMinutes(10);
    /** The shortest sampling interval ({@link Builder#sampleInterval}). */
    public static final Duration MIN_SAMPLE_INTERVAL = Duration.ofMillis(1);

    /**
     * The longest sampling interval ({@link Builder#sampleInterval}): accounting takes a sweep more than 10 minutes
     * after the previous one for a jump of the wall clock and credits nothing for it, so sweeps come at least twice
     * as often.
     */
    public static final Duration MAX_SAMPLE_INTERVAL = Duration.ofMinutes(5);
    /** How long {@link #close} lets requests in progress finish their answer before it closes their connections. */
    public static final Duration CLOSE_GRACE = Duration.ofSeconds(5);

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
    private final EnvironmentHandler environment;
    /** the node's accounting sampler, when this console is it (empty: another process is, or accounting is off) */
    private final Optional<AccountingSampler> sampler;
    /** Routes a host added, by path prefix, longest first: they take precedence over the console's own. */
    private final Map<String, HttpHandler> hostRoutes;
    /** On the one context, outermost first: errors and headers, the caller, the Host rule, bearer auth. */
    private final List<Filter> routeFilters;
    private final CallerResolver callers;
    private final ClientLimits limits;
    private JettyTransport transport;

    private ConsoleServer(Builder b) {
        this.b = b;
        this.token = ApiToken.loadOrCreate(b.privateDir);
        String hostname = hostname();
        this.workers = new ConsoleWorkers();
        this.ticker = Executors.newSingleThreadScheduledExecutor(ConsoleWorkers.daemon("gpusched-console-tick"));
        this.sse = new SseHub(b.maxSseClients, b.eventStall.toNanos(), ConsoleWorkers.daemon("gpusched-console-sse"));
        this.watcher = new NodeWatcher(b.scheduler, b.scheduler.inventory(), b.refresh, sse, b.clock,
                b.sampleInterval, HISTORY);
        watcher.followUps(ticker);
        this.limits = new ClientLimits(new ClientLimits.Settings(b.maxConnectionsPerClient, b.maxRequestsPerClient,
                b.maxEventStreamsPerClient, b.maxConnections, b.maxHeldRequests));
        this.meters = new ConsoleMeters(b.scheduler, hostname, sse, limits);
        this.allocations = new AllocationsHandler(b.scheduler, watcher, meters, b.maxBodyBytes);
        this.environment = new EnvironmentHandler(b.scheduler, b.cudaPaths);
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
        route(EventsHandler.PATH, new EventsHandler(sse, watcher, workers, b.maxSseClients, limits), true);
        route(API + "/whoami", ex -> Exchanges.get(ex, () -> Exchanges.json(ex, 200, whoami(Caller.of(ex)))), true);
        route(AllocationsHandler.PATH, allocations, true);
        AccountingStore store = AccountingStore.at(b.privateDir);
        UsageHandler usage = new UsageHandler(store, b.clock);
        for (String p : UsageHandler.paths()) {
            route(p, usage, true);
        }
        this.sampler = openSampler(b, store);
        hostRoutes = new TreeMap<>((x, y) -> x.length() != y.length() ? y.length() - x.length() : x.compareTo(y));
        hostRoutes.putAll(b.hostRoutes);
        callers = new CallerResolver(b.adminGroup);
        routeFilters = List.of(new ExchangeFilter(), new IdentityFilter(callers, token), new ClientLimitFilter(limits),
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
        Optional<AccountingSampler> s =
                AccountingSampler.open(store, b.accounting, b.scheduler.inventory(), b.attribution,
                        new HostIdleEffects(b.scheduler).listener(watcher::onIdle), b.clock);
        s.ifPresent(x -> {
            x.addIntervalListener(usageMeters::onInterval);
            b.scheduler.addListener(x);
            x.knownLive(b.scheduler.allocations()); // one granted while no sampler ran is recorded from its grant
            watcher.feedSweeps(x::sweep);
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
     * Binds the TCP address (and the Unix socket, when one was asked for) and starts serving.
     *
     * @return this
     * @throws UncheckedIOException when the address or the socket cannot be bound
     * @throws IllegalStateException when the socket path is unsafe or in use (see {@link Builder#unixSocket}), or
     *     this console was started before
     */
    public ConsoleServer start() {
        if (transport != null) {
            throw new IllegalStateException("the console was already started");
        }
        UnixSocketFile socketFile = b.unixSocket == null ? null : new UnixSocketFile(b.unixSocket, b.socketGroup);
        int maxThreads = b.threads + b.maxSseClients + ConsoleWorkers.JETTY_OWN;
        JettyTransport t = new JettyTransport(b.listen, socketFile, maxThreads, b.idleTimeout, limits,
                this::dispatch, routeFilters);
        t.start();
        try {
            transport = t;
            if (b.ticking) {
                ticker.scheduleWithFixedDelay(watcher::tick, 0, b.sampleInterval.toMillis(), TimeUnit.MILLISECONDS);
            }
            ticker.scheduleWithFixedDelay(sse::heartbeat, 15, 15, TimeUnit.SECONDS);
        } catch (RuntimeException | Error e) { // never leave the port listening behind a start that failed
            transport = null;
            t.stop();
            throw e;
        }
        LOG.info("gpusched console on {}/ (token in {}){}", url(), token.file(),
                b.unixSocket == null ? "" : "; node socket " + t.socketPath());
        return this;
    }

    /**
     * @return the bound address (the port is real when 0 was asked for)
     * @throws IllegalStateException when the server is not listening (not started, or its start failed)
     */
    public InetSocketAddress address() {
        JettyTransport t = transport;
        if (t == null) {
            throw new IllegalStateException("the console is not listening (not started, or its start failed)");
        }
        return new InetSocketAddress(b.listen.getAddress(), t.port());
    }

    /** @return the Unix socket served (the node service's), when one was asked for */
    public Optional<Path> socketPath() {
        return Optional.ofNullable(b.unixSocket);
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

    /**
     * For a host's handler that answers late (a request that waits in a queue) or streams: lifts the connection's idle
     * timeout ({@link Builder#idleTimeout}) until the exchange ends. Call it after reading the request body, so that a
     * client that stalls in its body is still cut. A client that goes away is noticed when the answer is written.
     * The exchange takes one of the {@link Builder#maxHeldRequests} slots until it ends.
     *
     * @param exchange a request this console serves
     * @throws GpuAllocationException {@code RATE_LIMITED}, naming {@code maxHeldRequests}, when that many requests are
     *                                held open already (nothing was held; answer the refusal and end the exchange)
     */
    public static void keepOpen(HttpExchange exchange) {
        Exchanges.holdOpen(exchange);
    }

    /**
     * The one allocation shape as the console answers with it (a single allocation, a list's, an event's): gpu-core's
     * {@code AllocationView} with the owner, job id and labels bounded (256 bytes each, at most 32
     * labels) and two fields saying what was cut, {@code truncatedFields} and {@code labelsOmitted} (docs/SERVICE.md),
     * for a host's routes that answer with an allocation (the node service's).
     *
     * @param allocation the allocation
     * @param now        when the view is taken (whether its lease has ended)
     * @return the allocation's JSON fields, in order, for Jackson to write
     */
    public static Map<String, Object> allocationView(Allocation allocation, Instant now) {
        return Views.allocation(allocation, now);
    }

    /** @return this build's version, as {@code /api/v1/node} reports it (from the build, not a literal) */
    public static String version() {
        return VERSION;
    }

    /** @return the event stream (for tests) */
    SseHub eventHub() {
        return sse;
    }

    /** @return the transport (for tests that count its connections and threads) */
    JettyTransport transport() {
        return transport;
    }

    /** @return the client limits' counts (for tests) */
    ClientLimits limits() {
        return limits;
    }

    /** @return the node watcher (for tests) */
    NodeWatcher watcher() {
        return watcher;
    }

    /** @return worker threads held by open event streams (for tests) */
    int heldWorkers() {
        return workers.held();
    }

    /**
     * Stops serving. Event streams are ended; requests in progress (held open, as a wait or a job's output, or not, as
     * an allocation being made) are given up to {@link #CLOSE_GRACE} together to finish their answer before every
     * connection is closed: a host that ends its waits and jobs first (the node service does, and {@code gpusched
     * serve} closes it before the console) has its clients told how they ended, not cut off.
     */
    @Override
    public void close() {
        b.scheduler.removeListener(listener);
        ticker.shutdownNow();
        sampler.ifPresent(s -> {
            b.scheduler.removeListener(s);
            s.close();
        });
        sse.close();
        long until = System.nanoTime() + CLOSE_GRACE.toNanos();
        try {
            while (limits.inProgress() > 0 && System.nanoTime() - until < 0) {
                Thread.sleep(10);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        JettyTransport t = transport;
        if (t != null) {
            t.stop();
        }
        meters.close();
    }

    // ---------------------------------------------------------------------------------------------------- routing

    /** @return every path this server answers, the API's as its OpenAPI document spells them (for tests) */
    Map<String, Boolean> servedPaths() {
        Map<String, Boolean> m = new LinkedHashMap<>(apiPaths);
        m.put(AllocationsHandler.PREFIX + "{id}", true);
        m.put(AllocationsHandler.PREFIX + "{id}" + EnvironmentHandler.SUFFIX, true);
        return m;
    }

    /**
     * Routes a request that passed the filters: a host's route by the longest prefix it matches, then exact paths
     * from the console's table, then allocations by id, else 404. On the Unix socket the console's own changes are
     * for admins only.
     */
    private void dispatch(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        for (Map.Entry<String, HttpHandler> r : hostRoutes.entrySet()) {
            String p = r.getKey();
            if (path.equals(p) || path.startsWith(p.endsWith("/") ? p : p + "/")) {
                r.getValue().handle(ex);
                return;
            }
        }
        serveOwn(ex);
    }

    /**
     * Serves a request by the console's own routes, past the hosts' ({@link Builder#route}): for a host's route that
     * serves some paths under its prefix and leaves the others to the console (the node service's
     * {@code /api/v1/allocations} leaves {@code /api/v1/allocations/{id}/environment}). On the Unix socket the
     * console's own changes stay for admins only.
     *
     * @param ex a request this console serves, that passed its filters
     */
    public void serveOwn(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        HttpHandler h = routes.get(path);
        if (h == null && EnvironmentHandler.matches(path)) {
            h = environment;
        } else if (h == null && path.startsWith(AllocationsHandler.PREFIX)) {
            h = allocations;
        }
        if (h == null) {
            Exchanges.error(ex, 404, "no such resource: " + path + " (see " + API + "/openapi.json)", null);
            return;
        }
        String method = ex.getRequestMethod();
        Caller caller = Caller.of(ex);
        if (IdentityFilter.unix(ex) && !method.equals("GET") && !method.equals("HEAD") && !caller.admin()) {
            Exchanges.drain(ex, b.maxBodyBytes);
            Exchanges.error(ex, 403, method + " " + path + " on the node socket is for admins (root or the admin"
                    + " group); " + caller.user() + " (uid " + caller.uid() + ") is not one", "FORBIDDEN");
            return;
        }
        h.handle(ex);
    }

    /** @return the caller as {@code GET /api/v1/whoami} shows it (docs/SERVICE.md) */
    static Map<String, Object> whoami(Caller c) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("uid", c.uid());
        m.put("gid", c.gid());
        m.put("user", c.user());
        m.put("groups", c.groups());
        m.put("admin", c.admin());
        return m;
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
        private Path privateDir;
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
        private ProcessAttribution attribution;
        private Path unixSocket;
        private String socketGroup;
        private String adminGroup;
        private Duration idleTimeout;
        private Integer maxConnectionsPerClient;
        private Integer maxRequestsPerClient;
        private Integer maxEventStreamsPerClient;
        private Integer maxConnections;
        private Integer maxHeldRequests;
        private final Map<String, HttpHandler> hostRoutes = new LinkedHashMap<>();

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
         * @param v the state directory, where the token file and accounting live unless {@link #privateDir} says
         *     elsewhere; default the scheduler's ({@link GpuScheduler#stateDir()}), required for a scheduler that has
         *     none
         * @return this
         */
        public Builder stateDir(Path v) {
            unset(stateDir, "state directory");
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /**
         * @param v where the console keeps what only its user may write: the token file and the accounting store
         *     ({@code gpu.service.private_dir}: required when the state directory is shared with a state group);
         *     default the state directory. Checked with {@link StateDirectory#requirePrivate}.
         * @return this
         */
        public Builder privateDir(Path v) {
            unset(privateDir, "private directory");
            privateDir = Objects.requireNonNull(v, "privateDir");
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
         *     {@link ConsoleServer#MIN_SAMPLE_INTERVAL}, at most {@link ConsoleServer#MAX_SAMPLE_INTERVAL}). Faster
         *     than 100 ms, the ten-minute history keeps one point per 100 ms (the latest in each), so its memory stays
         *     at 6,001 points per GPU
         * @return this
         * @throws IllegalArgumentException when {@code v} is under one millisecond or over five minutes
         */
        public Builder sampleInterval(Duration v) {
            if (v.compareTo(MIN_SAMPLE_INTERVAL) < 0) {
                throw new IllegalArgumentException("sample interval " + v + " is under the minimum of "
                        + MIN_SAMPLE_INTERVAL.toMillis() + " ms (use --interval 1ms or more)");
            }
            if (v.compareTo(MAX_SAMPLE_INTERVAL) > 0) {
                throw new IllegalArgumentException("sample interval " + v + " is over the maximum of "
                        + MAX_SAMPLE_INTERVAL.toMinutes() + " min (use --interval 5m or less: accounting takes a sweep"
                        + " more than 10 min after the last for a jump of the clock and credits nothing for it)");
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
         * @param v most HTTP worker threads, at least 1, started on demand (default 256); a client that stalls in
         *     its headers holds none, one that stalls in its body holds one until the idle timeout closes it. Each
         *     open event stream holds a thread of its own for its life, on top of these (so at most
         *     {@code v + maxSseClients}, plus Jetty's few)
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

        /**
         * @param v whom a GPU's processes work for, for the accounting sampler (default: gpusched's own rule,
         *          {@code AllocationAttribution.host()}); a chain that names pods or Slurm jobs has them metered too
         * @return this
         */
        public Builder attribution(ProcessAttribution v) {
            unset(attribution, "attribution");
            attribution = Objects.requireNonNull(v, "attribution");
            return this;
        }

        /**
         * Serves the same routes on a Unix socket too: the node service's ({@code gpusched serve --socket}). Callers
         * there are known by their peer credentials ({@link Caller#of(HttpExchange)}). The directory is created
         * {@code 0755} when absent, and must be a directory (not a link) only its owner (root, or this process's
         * user) can write; a file already at the path is replaced only when it is a socket nothing answers on
         * (anything else is refused, naming it). The socket is {@code 0666}, or {@code 0660} with
         * {@link #socketGroup}; it is removed on {@link ConsoleServer#close()}.
         *
         * @param v the socket's path (at most 82 bytes: it is bound beside the path first)
         * @return this
         */
        public Builder unixSocket(Path v) {
            unset(unixSocket, "unix socket");
            Objects.requireNonNull(v, "unixSocket");
            if (v.toString().isEmpty() || v.getFileName() == null) {
                throw new IllegalArgumentException("--socket \"" + v + "\" is not a file path");
            }
            unixSocket = v.toAbsolutePath().normalize();
            return this;
        }

        /**
         * @param v the only group whose members may connect to the Unix socket (mode 0660, this group); without it
         *     any local user may (0666)
         * @return this
         * @throws IllegalArgumentException when the name cannot be a group's
         */
        public Builder socketGroup(String v) {
            unset(socketGroup, "socket group");
            socketGroup = groupName(v, "--socket-group");
            return this;
        }

        /**
         * @param v the admin group: its members are admins on the Unix socket ({@link Caller#admin()}), as root is;
         *     default none (root only)
         * @return this
         * @throws IllegalArgumentException when the name cannot be a group's
         */
        public Builder adminGroup(String v) {
            unset(adminGroup, "admin group");
            adminGroup = groupName(v, "admin group");
            return this;
        }

        private static String groupName(String v, String what) {
            Objects.requireNonNull(v, what);
            if (!CallerResolver.name(v) || v.startsWith("-")) {
                throw new IllegalArgumentException(what + " \"" + SampleHistory.printable(v) + "\" is not a group"
                        + " name (printable, no blank, not starting with '-', at most 256 characters)");
            }
            return v;
        }

        /**
         * @param v how long a connection may stay silent, also in the middle of a request, before it is closed
         *     (default 10 s; at least 1 s). Event streams and handlers that call {@link ConsoleServer#keepOpen} are
         *     exempt while they run
         * @return this
         */
        public Builder idleTimeout(Duration v) {
            unset(idleTimeout, "idle timeout");
            if (v.compareTo(Duration.ofSeconds(1)) < 0) {
                throw new IllegalArgumentException("idle timeout " + v + " is under 1 s");
            }
            idleTimeout = v;
            return this;
        }

        /**
         * @param v most connections one client may hold open at once, at least 1 (default 64). A client is a uid: the
         *     node socket's peer, or on TCP the owner of the client's socket when it is on this host (read from
         *     {@code /proc/net/tcp}, as identd does); a client on another host is its address. Root is bound by
         *     {@link #maxConnections} only. One over the limit is answered {@code 429 TOO_MANY_CONNECTIONS} and closed
         * @return this
         */
        public Builder maxConnectionsPerClient(int v) {
            int checked = positive(v, "max connections per client");
            unset(maxConnectionsPerClient, "max connections per client");
            maxConnectionsPerClient = checked;
            return this;
        }

        /**
         * @param v most requests one client may have in progress at once (handlers running, queued waits included,
         *     event streams not), at least 1 (default 32); past it {@code 429 TOO_MANY_CONNECTIONS}
         * @return this
         */
        public Builder maxRequestsPerClient(int v) {
            int checked = positive(v, "max requests per client");
            unset(maxRequestsPerClient, "max requests per client");
            maxRequestsPerClient = checked;
            return this;
        }

        /**
         * @param v most event streams one client may hold open, at least 1 (default 8); past it
         *     {@code 429 TOO_MANY_CONNECTIONS}, so that one client cannot take the {@link #maxSseClients} slots
         * @return this
         */
        public Builder maxEventStreamsPerClient(int v) {
            int checked = positive(v, "max event streams per client");
            unset(maxEventStreamsPerClient, "max event streams per client");
            maxEventStreamsPerClient = checked;
            return this;
        }

        /**
         * @param v most requests held open at once, all clients together (root too): a host's request that waits in a
         *     queue or streams a job's output ({@link #keepOpen}) holds a worker thread for as long; at least 1 and
         *     under {@link #threads} (default: three quarters of the threads, 192 of 256; none with one thread), so
         *     that the other workers stay for every other request however many wait. Event streams are not counted:
         *     {@link #maxSseClients} bounds them, on workers of their own. Past it {@link #keepOpen} refuses with
         *     {@code RATE_LIMITED} naming {@code maxHeldRequests}
         * @return this
         */
        public Builder maxHeldRequests(int v) {
            int checked = positive(v, "max held requests");
            unset(maxHeldRequests, "max held requests");
            maxHeldRequests = checked;
            return this;
        }

        /**
         * @param v most connections open at once, all clients together (root too), at least 1 (default 4096): each
         *     holds a file descriptor, and the node's ledger needs some
         * @return this
         */
        public Builder maxConnections(int v) {
            int checked = positive(v, "max connections");
            unset(maxConnections, "max connections");
            maxConnections = checked;
            return this;
        }

        /**
         * Adds a route of the host's (the node service adds {@code /api/v1/jobs}, {@code /api/v1/queue}, ...) to the
         * same route table, behind the same filters: it serves {@code pathPrefix} and every path under it
         * ({@code pathPrefix + "/..."}), and takes precedence over the console's own routes there (the longest
         * prefix wins). The handler reads its caller with {@link Caller#of(HttpExchange)} and decides what the
         * caller may do; on TCP the Host rule and the token have already been applied.
         *
         * @param pathPrefix an absolute path without a trailing slash, query or fragment, e.g. {@code /api/v1/jobs}
         * @param handler    its handler
         * @return this
         * @throws IllegalArgumentException when the prefix is not such a path
         * @throws IllegalStateException when the prefix was already routed
         */
        public Builder route(String pathPrefix, HttpHandler handler) {
            Objects.requireNonNull(pathPrefix, "pathPrefix");
            Objects.requireNonNull(handler, "handler");
            if (!pathPrefix.startsWith("/") || pathPrefix.length() < 2 || pathPrefix.endsWith("/")
                    || pathPrefix.contains("//") || pathPrefix.contains("/./") || pathPrefix.contains("/../")
                    || pathPrefix.endsWith("/..") || pathPrefix.endsWith("/.")
                    || !pathPrefix.chars().allMatch(c -> c > 0x20 && c < 0x7f && c != '?' && c != '#'
                            && c != '%' && c != '\\')) {
                throw new IllegalArgumentException("route \"" + SampleHistory.printable(pathPrefix) + "\" is not"
                        + " an absolute path without a trailing slash, query, escapes or dot segments (e.g."
                        + " /api/v1/jobs)");
            }
            if (hostRoutes.putIfAbsent(pathPrefix, handler) != null) {
                throw new IllegalStateException("route " + pathPrefix + " was already added");
            }
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
         * @throws GpuException when the private directory given is one others may change
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
            if (privateDir == null) {
                privateDir = stateDir;
            } else {
                privateDir = StateDirectory.requirePrivate(privateDir, "gpu.service.private_dir");
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
            idleTimeout = idleTimeout != null ? idleTimeout : Duration.ofSeconds(10);
            maxConnectionsPerClient = maxConnectionsPerClient != null ? maxConnectionsPerClient : 64;
            maxRequestsPerClient = maxRequestsPerClient != null ? maxRequestsPerClient : 32;
            maxEventStreamsPerClient = maxEventStreamsPerClient != null ? maxEventStreamsPerClient : 8;
            maxConnections = maxConnections != null ? maxConnections : 4096;
            // one worker alone cannot be held and leave one for the others: then no request is held (waits refused)
            maxHeldRequests = maxHeldRequests != null ? maxHeldRequests : threads - Math.max(1, threads / 4);
            if (maxHeldRequests >= threads) {
                throw new IllegalArgumentException("max held requests " + maxHeldRequests + " must be under the "
                        + threads + " threads, so that some workers stay for other requests");
            }
            if (socketGroup != null && unixSocket == null) {
                throw new IllegalArgumentException("--socket-group " + socketGroup + " is for the Unix socket, and no"
                        + " socket was asked for (unixSocket / --socket)");
            }
            return new ConsoleServer(this);
        }
    }
}
