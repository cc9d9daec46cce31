package io.gpusched.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuAllocationException;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A {@link NodeClient} served by the node service ({@code gpusched serve}) over its Unix socket: HTTP/1.1 with the
 * JDK's {@link java.nio.channels.SocketChannel} and {@link java.net.UnixDomainSocketAddress}, one connection per
 * request, the same routes and JSON as the console's REST API ({@code docs/SERVICE.md}). The service knows the caller
 * from the kernel (the connection's peer credentials), so an embedding host that runs as an ordinary user is served
 * as that user, and needs only this module and gpu-core on its class path.
 *
 * <pre>
 * try (NodeClient node = ServiceClient.connect(ServiceClient.defaultSocket())) {
 *     AllocationView a = node.allocate(List.of("--gpu=2", "--lease=2h"));
 *     // CUDA_VISIBLE_DEVICES and the rest, for the work to start with
 *     Map&lt;String, String&gt; env = node.environment(a.id(), Optional.empty()).variables();
 *     // ... start the work with env ...
 *     node.release(a.id());
 * }
 * </pre>
 *
 * <p>Every wait has a limit: connecting ({@link Builder#connectTimeout}, 5 s), an answer ({@link
 * Builder#answerTimeout}, 30 s, plus the wait of a request that queues), and answers are read within a size limit
 * ({@link Builder#maxAnswerBytes}, 16 MiB). Streams (an attached job's output, {@code logs --follow}, {@code watch})
 * have no overall limit; a watch ends when the service sends nothing (not even its heartbeat) for a minute. A request
 * that cannot be carried out is a {@link NodeServiceException} naming the socket; refusals are the library's typed
 * exceptions. Thread-safe: requests may run from several threads at once.
 */
public final class ServiceClient implements NodeClient {
    /** The node service's socket when neither {@code GPUSCHED_SOCKET} nor the configuration names another. */
    public static final Path DEFAULT_SOCKET = Path.of("/run/gpusched/gpusched.sock");
    /** The environment variable naming the service's socket. */
    public static final String SOCKET_ENV = "GPUSCHED_SOCKET";
    static final String API = "/api/v1";
    /** The most pages of one list {@link #allocations()} reads by default ({@link Builder#maxPages}). */
    public static final int DEFAULT_MAX_PAGES = 1000;
    /** How long a watch waits for a byte before it gives the service up (its heartbeat comes every 15 s). */
    static final Duration WATCH_IDLE = Duration.ofSeconds(60);

    private final Path socket;
    private final Duration connectTimeout;
    private final Duration answerTimeout;
    private final long maxAnswerBytes;
    private final int maxLineBytes;
    private final int maxPages;
    private final Set<UnixConnection> open = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    private ServiceClient(Builder b) {
        this.socket = b.socket;
        this.connectTimeout = b.connectTimeout;
        this.answerTimeout = b.answerTimeout;
        this.maxAnswerBytes = b.maxAnswerBytes;
        this.maxLineBytes = b.maxLineBytes;
        this.maxPages = b.maxPages;
    }

    /**
     * @param socket the service's socket
     * @return a client with the default limits (nothing is connected until the first request)
     */
    public static ServiceClient connect(Path socket) {
        return builder().socket(socket).build();
    }

    /** @return {@code $GPUSCHED_SOCKET} when set (and not empty), else {@link #DEFAULT_SOCKET} */
    public static Path defaultSocket() {
        return defaultSocket(System.getenv());
    }

    /**
     * @param environment an environment
     * @return its {@code GPUSCHED_SOCKET} when set (and not empty), else {@link #DEFAULT_SOCKET}
     */
    public static Path defaultSocket(Map<String, String> environment) {
        String env = environment.get(SOCKET_ENV);
        return env == null || env.isBlank() ? DEFAULT_SOCKET : Path.of(env);
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the service's socket */
    public Path socket() {
        return socket;
    }

    // ------------------------------------------------------------------------------------------------ the node

    @Override
    public NodeInfo node() {
        Replies r = replies("GET " + API + "/node");
        return r.node(call("GET", API + "/node", null, r, 200, "read", "node"));
    }

    /**
     * {@inheritDoc}
     *
     * <p>Each device's holders are whole: where the service lists only the first of them (it bounds a device's
     * holders and says how many there are, {@code holdersTotal}), the rest are read from
     * {@code GET /api/v1/allocations?device=<index>}, page by page as {@link #allocations()} reads them.
     */
    @Override
    public List<DeviceView> devices() {
        Replies r = replies("GET " + API + "/devices");
        JsonNode answer = call("GET", API + "/devices", null, r, 200, "read", "devices");
        List<DeviceView> out = new ArrayList<>(r.devices(answer));
        for (int i = 0; i < out.size(); i++) {
            DeviceView d = out.get(i);
            long total = r.holdersTotal(answer.get(i));
            if (total > d.holders().size()) {
                List<AllocationView> holders = pages(API + "/allocations?device=" + d.index(),
                        "the holders of GPU " + d.index());
                out.set(i, new DeviceView(d.index(), d.uuid(), d.name(), d.vendor(), d.pciBusId(),
                        d.memoryTotalBytes(), d.memoryUsedBytes(), d.utilizationPercent(), d.temperatureCelsius(),
                        d.powerWatts(), d.health(), d.healthReason(), d.pool(), d.poolReason(), d.reservableBytes(),
                        holders));
            }
        }
        return out;
    }

    @Override
    public Topology topology() {
        Replies r = replies("GET " + API + "/topology");
        return r.topology(call("GET", API + "/topology", null, r, 200, "read", "topology"));
    }

    @Override
    public NodeStatus status() {
        NodeInfo node = node();
        String at = Instant.now().toString();
        return new NodeStatus(node, at, devices(), allocations());
    }

    @Override
    public Identity whoami() {
        Replies r = replies("GET " + API + "/whoami");
        return r.identity(call("GET", API + "/whoami", null, r, 200, "read", "whoami"));
    }

    // ------------------------------------------------------------------------------------------------ allocations

    @Override
    public AllocationView allocate(List<String> flags) {
        return allocate(flags, Optional.empty());
    }

    @Override
    public AllocationView allocate(List<String> flags, Duration wait) throws InterruptedException {
        Objects.requireNonNull(wait, "wait");
        try {
            return allocate(flags, Optional.of(wait));
        } catch (NodeServiceException e) {
            if (Thread.interrupted()) {
                throw new InterruptedException("interrupted while waiting for GPUs from the node service on "
                        + socket);
            }
            throw e;
        }
    }

    private AllocationView allocate(List<String> flags, Optional<Duration> wait) {
        ObjectNode body = Json.MAPPER.createObjectNode();
        ArrayNode f = body.putArray("flags");
        flags.forEach(f::add);
        wait.ifPresent(w -> body.put("wait", duration(w)));
        String path = API + "/allocations";
        Replies r = replies("POST " + path);
        return r.allocation(call("POST", path, body, r, 201, "allocate", flags.toString(),
                wait.orElse(Duration.ZERO)));
    }

    @Override
    public boolean release(String id) {
        String path = API + "/allocations/" + segment(id);
        Replies r = replies("DELETE " + path);
        JsonNode o = call("DELETE", path, null, r, 200, "release", id);
        return r.json().bool(o, "released", Optional.empty());
    }

    @Override
    public AllocationView renew(String id, Duration lease) {
        ObjectNode body = Json.MAPPER.createObjectNode();
        body.put("lease", duration(lease));
        String path = API + "/allocations/" + segment(id) + "/renew";
        Replies r = replies("POST " + path);
        return r.allocation(call("POST", path, body, r, 200, "renew", id));
    }

    /**
     * {@inheritDoc}
     *
     * <p>The service answers in pages (docs/SERVICE.md); this reads them all, following each page's
     * {@code Link: <...>; rel="next"} (a path of the same list on the same socket, nothing else), at most
     * {@link Builder#maxPages} of them. An allocation is listed once, also when it ends or another begins between
     * pages (the pages go by cursor).
     *
     * @throws NodeServiceException {@code ANSWER_TOO_LARGE} (reason {@code TOO_MANY_PAGES}) past
     *                              {@link Builder#maxPages}; {@code BAD_ANSWER} for a next page elsewhere than this
     *                              list on this socket, or one already read
     */
    @Override
    public List<AllocationView> allocations() {
        return pages(API + "/allocations", "allocations");
    }

    /** One page of a paged list: its JSON and the target of its {@code rel="next"} link, or null at the end. */
    private record Page(JsonNode json, String next) {
    }

    /** Longest next-page target followed. */
    static final int MAX_LINK_CHARS = 4096;

    /**
     * @param first   the first page's target, e.g. {@code /api/v1/allocations?device=3}
     * @param subject what the list is, for messages
     * @return the allocations of every page from {@code first} on, each once, in the service's order
     */
    private List<AllocationView> pages(String first, String subject) {
        List<AllocationView> out = new ArrayList<>();
        pages(first, subject, out::addAll);
        return out;
    }

    /**
     * Reads the pages from {@code first} on, handing each page's allocations not seen before to {@code each} as it
     * comes, so that a caller's own bound (a watch's {@code maxAnswerBytes}) applies page by page, not after all.
     */
    private void pages(String first, String subject, Consumer<List<AllocationView>> each) {
        String path = first.contains("?") ? first.substring(0, first.indexOf('?')) : first;
        int count = 0;
        Set<String> ids = new HashSet<>();
        Set<String> read = new HashSet<>();
        String target = first;
        for (int n = 0; target != null; n++) {
            if (n == maxPages) {
                throw new NodeServiceException(NodeServiceException.Kind.ANSWER_TOO_LARGE, socket, 200,
                        "TOO_MANY_PAGES", "the node service on " + socket + " answered " + subject + " in more than "
                                + maxPages + " pages (" + count + " allocations read), the client's limit"
                                + " (ServiceClient.Builder.maxPages)",
                        null);
            }
            read.add(target);
            Replies r = replies("GET " + target);
            Page p = page(target, r, subject);
            List<AllocationView> fresh = new ArrayList<>();
            for (AllocationView a : r.allocations(p.json())) {
                if (ids.add(a.id())) {
                    fresh.add(a);
                }
            }
            count += fresh.size();
            each.accept(fresh);
            target = p.next() == null ? null : sameList(p.next(), path, r);
            if (target != null && read.contains(target)) {
                throw r.json().bad("a Link rel=\"next\" to a page already read (" + Answer.show(target) + ")");
            }
        }
    }

    /** @return {@code link} as a target on this socket: a path of the list {@code path} with a query, else refused */
    static String sameList(String link, String path, Replies r) {
        String t = link.startsWith("http://localhost/") ? link.substring("http://localhost".length()) : link;
        boolean plain = !t.isEmpty() && t.length() <= MAX_LINK_CHARS
                && t.chars().allMatch(c -> c > 0x20 && c < 0x7f);
        if (!plain || !t.startsWith(path + "?") || t.contains("#")) {
            throw r.json().bad("a Link rel=\"next\" that is not a page of " + path + " on this socket: "
                    + Answer.show(link));
        }
        return t;
    }

    private Page page(String target, Replies r, String subject) {
        UnixConnection c = send("GET", target, null, deadline(Duration.ZERO));
        try {
            Answer a = head(c, r, "read", subject);
            if (a.status() != 200) {
                throw unexpected(a, r, 200, "read", subject);
            }
            String link = a.header("link");
            JsonNode json = r.json().parse(read(a, c));
            return new Page(json, link == null ? null : next(link, r));
        } finally {
            done(c);
        }
    }

    private static final Pattern LINK = Pattern.compile("\\s*<([^>]*)>((?:\\s*;\\s*[^;,]*)*)\\s*(?:,|$)");
    private static final Pattern REL_NEXT = Pattern.compile(";\\s*rel\\s*=\\s*(?:\"next\"|next)\\s*(?=;|$)");

    /** @return the target of the {@code rel="next"} link of a {@code Link} header, or null when it has none */
    static String next(String header, Replies r) {
        Matcher m = LINK.matcher(header);
        String next = null;
        int at = 0;
        while (at < header.length()) {
            m.region(at, header.length());
            if (!m.lookingAt() || m.end() == at) {
                throw r.json().bad("a malformed Link header: " + Answer.show(header));
            }
            if (REL_NEXT.matcher(m.group(2)).find()) {
                if (next != null) {
                    throw r.json().bad("a Link header with two rel=\"next\" links: " + Answer.show(header));
                }
                next = m.group(1);
            }
            at = m.end();
        }
        return next;
    }

    @Override
    public Optional<AllocationView> allocation(String id) {
        String path = API + "/allocations/" + segment(id);
        Replies r = replies("GET " + path);
        try {
            return Optional.of(r.allocation(call("GET", path, null, r, 200, "read", id)));
        } catch (GpuAllocationException e) {
            if (e.reason() == GpuAllocationException.Reason.UNKNOWN_ALLOCATION) {
                return Optional.empty();
            }
            throw e;
        }
    }

    @Override
    public AllocationEnvironment environment(String allocationId, Optional<String> cuda) {
        String path = API + "/allocations/" + segment(allocationId) + "/environment"
                + cuda.map(c -> "?cuda=" + URLEncoder.encode(c, StandardCharsets.UTF_8)).orElse("");
        Replies r = replies("GET " + path);
        return r.environment(call("GET", path, null, r, 200, "read", allocationId), allocationId);
    }

    @Override
    public List<QueueEntry> queue() {
        Replies r = replies("GET " + API + "/queue");
        return r.queue(call("GET", API + "/queue", null, r, 200, "read", "queue"));
    }

    @Override
    public void watch(Duration interval, Predicate<NodeSnapshot> each) throws InterruptedException {
        String path = API + "/events";
        Replies r = replies("GET " + path);
        UnixConnection c = send("GET", path, null, deadline(Duration.ZERO));
        try {
            Answer a = head(c, r, "read", "events");
            if (a.status() != 200 || !a.isType("text/event-stream")) {
                throw unexpected(a, r, 200, "read", "events");
            }
            c.limits(WATCH_IDLE.toNanos(), Long.MAX_VALUE);
            WatchState state = new WatchState(socket, maxAnswerBytes);
            String event = "message";
            StringBuilder data = new StringBuilder();
            while (true) {
                String line = line(a, "watch interrupted");
                if (line == null) {
                    throw new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 200,
                            "CONNECTION_LOST", "the node service on " + socket + " ended the event stream (the"
                                    + " service stopped, or dropped this slow client)",
                            null);
                }
                if (line.isEmpty()) {
                    if (data.length() > 0 && onEvent(r, event, data.toString(), state)
                            && !each.test(new NodeSnapshot(state.devices()))) {
                        return;
                    }
                    event = "message";
                    data.setLength(0);
                } else if (line.startsWith("event:")) {
                    event = line.substring(6).strip();
                } else if (line.startsWith("data:")) {
                    if (data.length() > 0) {
                        data.append('\n');
                    }
                    data.append(line.substring(line.startsWith("data: ") ? 6 : 5));
                    if (data.length() > maxAnswerBytes) {
                        throw new NodeServiceException(NodeServiceException.Kind.ANSWER_TOO_LARGE, socket, 200,
                                "ANSWER_TOO_LARGE", "the node service on " + socket + " sent an event over the"
                                        + " client's limit of " + maxAnswerBytes + " bytes",
                                null);
                    }
                }
            }
        } finally {
            done(c);
        }
    }

    /**
     * Applies an event of the stream to what the watch knows: the {@code state} (and the pages its {@code truncated}
     * marker names, read at once), a {@code delta}, a {@code tick}'s metrics.
     *
     * @return whether it makes a frame (any of those, once the state came)
     */
    private boolean onEvent(Replies r, String event, String data, WatchState state) {
        switch (event) {
            case "state" -> {
                String rest = state.state(r, r.json().parse(data));
                if (rest != null) {
                    String list = API + "/allocations";
                    // page by page: the watch's bound applies as they come, not once all are held
                    pages(sameList(rest, list, r), "the allocations a state event left out", p -> state.rest(r, p));
                }
                return true;
            }
            case "delta" -> {
                if (!state.started()) {
                    throw r.json().bad("a delta event before the state event");
                }
                state.delta(r, r.json().parse(data));
                return true;
            }
            case "tick" -> {
                if (!state.started()) {
                    return false;
                }
                state.tick(r, r.json().parse(data));
                return true;
            }
            default -> {
                return false;
            }
        }
    }

    // ------------------------------------------------------------------------------------------------ jobs

    @Override
    public JobExit run(JobSpec spec, JobListener listener) throws InterruptedException {
        String path = API + "/jobs";
        Replies r = replies("POST " + path);
        UnixConnection c = send("POST", path, jobBody(spec, false), deadline(spec.maxWait().orElse(Duration.ZERO)));
        String jobId = null;
        try {
            Answer a = head(c, r, "run", spec.argv().get(0));
            if (a.status() != 200) {
                throw unexpected(a, r, 200, "run", spec.argv().get(0));
            }
            // the job's output may pause for hours: no limit while it streams; the end of the connection ends it
            c.limits(0, Long.MAX_VALUE);
            while (true) {
                String line;
                try {
                    line = line(a, "interrupted while job " + jobId + " ran");
                } catch (NodeServiceException e) {
                    if (e.kind() == NodeServiceException.Kind.CONNECTION_LOST && !closed) {
                        throw jobLost(jobId, e);
                    }
                    throw e;
                }
                if (line == null) {
                    throw jobLost(jobId, null);
                }
                if (line.isBlank()) {
                    continue;
                }
                JsonNode o = r.json().object(r.json().parse(line), "a job event");
                String type = r.json().text(o, "type");
                switch (type) {
                    case "queued" -> listener.queued(r.json().int32(o, "position", 0, Integer.MAX_VALUE));
                    case "started" -> {
                        JobView job = r.job(o.get("job"));
                        jobId = job.id();
                        listener.started(job, r.allocation(o.get("allocation")));
                    }
                    case "stdout" -> listener.stdout(base64(r, o));
                    case "stderr" -> listener.stderr(base64(r, o));
                    case "exit" -> {
                        return new JobExit(r.json().int32(o, "code", Integer.MIN_VALUE, Integer.MAX_VALUE),
                                Optional.ofNullable(r.json().textOrNull(o, "signal")));
                    }
                    case "error" -> throw r.error(r.json().int32(o, "status", 100, 599),
                            line.getBytes(StandardCharsets.UTF_8), "run", jobId == null ? "job" : jobId);
                    default -> {
                        // a newer service's event: not this client's business
                    }
                }
            }
        } finally {
            done(c);
        }
    }

    private NodeServiceException jobLost(String jobId, Exception cause) {
        return new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 200, "CONNECTION_LOST",
                "the node service on " + socket + " ended the connection before "
                        + (jobId == null ? "the job started" : "job " + jobId + " ended")
                        + " (the service stopped, or was killed; a job it ran is ended and its GPUs released when it"
                        + " starts again: see gpusched jobs)",
                cause);
    }

    /** @return the next line of a stream, or null at its end */
    private String line(Answer a, String interrupted) throws InterruptedException {
        try {
            return a.line(maxLineBytes);
        } catch (NodeServiceException e) {
            if (Thread.interrupted()) {
                throw new InterruptedException(interrupted);
            }
            throw e;
        } catch (IOException e) {
            if (Thread.interrupted()) {
                throw new InterruptedException(interrupted);
            }
            throw lost(e);
        }
    }

    private byte[] base64(Replies r, JsonNode o) {
        try {
            return Base64.getDecoder().decode(r.json().text(o, "data"));
        } catch (IllegalArgumentException e) {
            throw r.json().bad("output that is not base64 (" + e.getMessage() + ")");
        }
    }

    @Override
    public JobView submit(JobSpec spec) {
        String path = API + "/jobs";
        Replies r = replies("POST " + path);
        return r.job(call("POST", path, jobBody(spec, true), r, 201, "run", spec.argv().get(0),
                spec.maxWait().orElse(Duration.ZERO)));
    }

    private static ObjectNode jobBody(JobSpec spec, boolean detach) {
        ObjectNode body = Json.MAPPER.createObjectNode();
        ArrayNode f = body.putArray("flags");
        spec.flags().forEach(f::add);
        spec.cuda().ifPresent(c -> body.put("cuda", c));
        ArrayNode argv = body.putArray("argv");
        spec.argv().forEach(argv::add);
        ObjectNode env = body.putObject("env");
        spec.env().forEach(env::put);
        body.put("cwd", spec.cwd());
        body.put("detach", detach);
        spec.maxWait().ifPresent(w -> body.put("wait", duration(w)));
        return body;
    }

    @Override
    public List<JobView> jobs() {
        Replies r = replies("GET " + API + "/jobs");
        return r.jobs(call("GET", API + "/jobs", null, r, 200, "read", "jobs"));
    }

    @Override
    public Optional<JobView> job(String id) {
        String path = API + "/jobs/" + segment(id);
        Replies r = replies("GET " + path);
        try {
            return Optional.of(r.job(call("GET", path, null, r, 200, "read", id)));
        } catch (NodeServiceException e) {
            if (e.kind() == NodeServiceException.Kind.REFUSED && e.status().orElse(0) == 404) {
                return Optional.empty();
            }
            throw e;
        }
    }

    @Override
    public void logs(String id, boolean follow, OutputStream out) throws InterruptedException {
        String path = API + "/jobs/" + segment(id) + "/logs" + (follow ? "?follow=true" : "");
        Replies r = replies("GET " + path);
        UnixConnection c = send("GET", path, null, deadline(Duration.ZERO));
        try {
            Answer a = head(c, r, "logs", id);
            if (a.status() != 200) {
                throw unexpected(a, r, 200, "logs", id);
            }
            c.limits(follow ? 0 : answerTimeout.toNanos(), Long.MAX_VALUE);
            byte[] b = new byte[8192];
            int n;
            while (true) {
                try {
                    n = a.readBody(b, 0, b.length);
                } catch (NodeServiceException e) {
                    if (Thread.interrupted()) {
                        throw new InterruptedException("interrupted while reading the logs of " + id);
                    }
                    throw e;
                }
                if (n < 0) {
                    break;
                }
                out.write(b, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the logs of job " + id + ": " + e.getMessage(), e);
        } finally {
            done(c);
        }
    }

    @Override
    public JobView cancel(String id) {
        String path = API + "/jobs/" + segment(id);
        Replies r = replies("DELETE " + path);
        return r.job(call("DELETE", path, null, r, 200, "cancel", id));
    }

    @Override
    public JobView signal(String id, String signal) {
        ObjectNode body = Json.MAPPER.createObjectNode();
        body.put("signal", signal);
        String path = API + "/jobs/" + segment(id) + "/signal";
        Replies r = replies("POST " + path);
        return r.job(call("POST", path, body, r, 200, "signal", id));
    }

    @Override
    public String source() {
        return "the node service on " + socket;
    }

    /** Closes every connection in progress (their calls end with {@code CONNECTION_LOST}); later calls are refused. */
    @Override
    public void close() {
        closed = true;
        for (UnixConnection c : open) {
            c.close();
        }
    }

    // ------------------------------------------------------------------------------------------------ plumbing

    private Replies replies(String what) {
        return new Replies(socket, what);
    }

    private JsonNode call(String method, String path, ObjectNode body, Replies r, int ok, String action,
            String subject) {
        return call(method, path, body, r, ok, action, subject, Duration.ZERO);
    }

    /** One request and its whole answer: the JSON of an {@code ok} answer, else the answer's error thrown. */
    private JsonNode call(String method, String path, ObjectNode body, Replies r, int ok, String action,
            String subject, Duration wait) {
        UnixConnection c = send(method, path, body, deadline(wait));
        try {
            Answer a = head(c, r, action, subject);
            if (a.status() != ok) {
                throw unexpected(a, r, ok, action, subject);
            }
            return r.json().parse(read(a, c));
        } finally {
            done(c);
        }
    }

    private long deadline(Duration wait) {
        long budget = answerTimeout.plus(wait).toNanos();
        return System.nanoTime() + budget;
    }

    private UnixConnection send(String method, String path, ObjectNode body, long until) {
        if (closed) {
            throw new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 0, "CLOSED",
                    "this client of the node service on " + socket + " is closed", null);
        }
        byte[] content;
        try {
            content = body == null ? new byte[0] : Json.MAPPER.writeValueAsBytes(body);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
        StringBuilder head = new StringBuilder(method).append(' ').append(path).append(" HTTP/1.1\r\n")
                .append("Host: localhost\r\nConnection: close\r\nAccept: application/json\r\n")
                .append("User-Agent: gpusched-client\r\n");
        if (body != null) {
            head.append("Content-Type: application/json\r\n");
        }
        if (body != null || !method.equals("GET")) {
            head.append("Content-Length: ").append(content.length).append("\r\n");
        }
        head.append("\r\n");
        byte[] h = head.toString().getBytes(StandardCharsets.US_ASCII);
        byte[] all = new byte[h.length + content.length];
        System.arraycopy(h, 0, all, 0, h.length);
        System.arraycopy(content, 0, all, h.length, content.length);
        UnixConnection c = UnixConnection.open(socket, connectTimeout.toNanos());
        open.add(c);
        try {
            c.limits(0, until);
            c.write(all, System.nanoTime() + answerTimeout.toNanos());
            return c;
        } catch (IOException e) {
            done(c);
            throw new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 0, "CONNECTION_LOST",
                    "the node service on " + socket + " closed the connection before it took the request: "
                            + e.getMessage(),
                    e);
        } catch (RuntimeException e) {
            done(c);
            throw e;
        }
    }

    private Answer head(UnixConnection c, Replies r, String action, String subject) {
        try {
            return Answer.read(c, socket);
        } catch (IOException e) {
            throw lost(e);
        }
    }

    private byte[] read(Answer a, UnixConnection c) {
        try {
            return a.body(maxAnswerBytes);
        } catch (IOException e) {
            throw lost(e);
        }
    }

    private RuntimeException unexpected(Answer a, Replies r, int ok, String action, String subject) {
        byte[] body;
        try {
            body = a.body(Math.min(maxAnswerBytes, 1024 * 1024));
        } catch (IOException e) {
            throw lost(e);
        }
        if (a.status() >= 200 && a.status() < 300) {
            return r.json().bad("status " + a.status() + " where " + ok + " was expected");
        }
        return r.error(a.status(), body, action, subject);
    }

    private NodeServiceException lost(IOException e) {
        return new NodeServiceException(NodeServiceException.Kind.CONNECTION_LOST, socket, 0, "CONNECTION_LOST",
                "the connection to the node service on " + socket + " failed: " + e.getMessage(), e);
    }

    private void done(UnixConnection c) {
        open.remove(c);
        c.close();
    }

    /** @return {@code s} percent-encoded as one path segment */
    static String segment(String s) {
        Objects.requireNonNull(s, "id");
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }

    /**
     * @return {@code d} as the service's duration text: whole seconds ({@code "600s"}) where it has no fraction of a
     *         second, else milliseconds
     * @throws IllegalArgumentException when it is negative or too long for the service's form (9 digits)
     */
    static String duration(Duration d) {
        if (d.isNegative()) {
            throw new IllegalArgumentException("a duration must not be negative: " + d);
        }
        if (d.getNano() == 0 && d.getSeconds() <= 999_999_999L) {
            return d.getSeconds() + "s";
        }
        if (d.toNanos() % 1_000_000 == 0 && d.toMillis() <= 999_999_999L) {
            return d.toMillis() + "ms";
        }
        if (d.getSeconds() <= 999_999_998L) {
            return (d.getSeconds() + 1) + "s"; // rounded up to the next second
        }
        throw new IllegalArgumentException("duration " + d + " is too long (at most 999999999 s)");
    }

    /** Builds a {@link ServiceClient}; only the socket is required. */
    public static final class Builder {
        private Path socket;
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Duration answerTimeout = Duration.ofSeconds(30);
        private long maxAnswerBytes = 16L * 1024 * 1024;
        private int maxLineBytes = 8 * 1024 * 1024;
        private int maxPages = DEFAULT_MAX_PAGES;

        private Builder() {
        }

        /** @param v the service's socket ({@link ServiceClient#defaultSocket()}) */
        public Builder socket(Path v) {
            this.socket = Objects.requireNonNull(v, "socket");
            return this;
        }

        /** @param v how long to try to connect (default 5 s) */
        public Builder connectTimeout(Duration v) {
            this.connectTimeout = positive(v, "connectTimeout");
            return this;
        }

        /**
         * @param v how long the service may take to answer, and the most it may stay silent while it answers (default
         *          30 s; a request that queues gets its wait on top)
         */
        public Builder answerTimeout(Duration v) {
            this.answerTimeout = positive(v, "answerTimeout");
            return this;
        }

        /** @param v the most bytes an answer read whole may have (default 16 MiB) */
        public Builder maxAnswerBytes(long v) {
            if (v < 1024) {
                throw new IllegalArgumentException("maxAnswerBytes must be at least 1024, was " + v);
            }
            this.maxAnswerBytes = v;
            return this;
        }

        /** @param v the most bytes one line of a stream may have (default 8 MiB) */
        public Builder maxLineBytes(int v) {
            if (v < 1024) {
                throw new IllegalArgumentException("maxLineBytes must be at least 1024, was " + v);
            }
            this.maxLineBytes = v;
            return this;
        }

        /**
         * @param v the most pages one paged list ({@link ServiceClient#allocations()}, a device's holders) may take
         *          (default {@value ServiceClient#DEFAULT_MAX_PAGES}: 500,000 allocations at 500 a page, or about
         *          29,000 whose job ids and labels are as long as the service's views keep them)
         */
        public Builder maxPages(int v) {
            if (v < 1) {
                throw new IllegalArgumentException("maxPages must be at least 1, was " + v);
            }
            this.maxPages = v;
            return this;
        }

        /**
         * @return the client
         * @throws IllegalStateException when no socket was given
         */
        public ServiceClient build() {
            if (socket == null) {
                throw new IllegalStateException("no socket: give one with socket(Path), e.g."
                        + " ServiceClient.defaultSocket()");
            }
            return new ServiceClient(this);
        }

        private static Duration positive(Duration v, String name) {
            if (v == null || v.isNegative() || v.isZero()) {
                throw new IllegalArgumentException(name + " must be positive, was " + v);
            }
            return v;
        }
    }
}
