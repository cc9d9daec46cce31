package io.gpusched.server;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.NodeNames;
import java.io.IOException;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * {@code /api/v1/allocations} (GET: the node's live allocations; POST: allocate) and
 * {@code /api/v1/allocations/{id}} (GET: one allocation; DELETE: release it). Changes go through the scheduler, so the
 * ledger's rate limits apply; a refusal keeps its reason code ({@code 409}, {@code 429} for {@code RATE_LIMITED},
 * {@code 400} for {@code INVALID_REQUEST}, {@code 404} for {@code UNKNOWN_ALLOCATION}).
 */
final class AllocationsHandler implements HttpHandler {
    static final String PATH = ConsoleServer.API + "/allocations";
    static final String PREFIX = PATH + "/";
    /**
     * Most allocations one page of {@code GET /api/v1/allocations} holds, and how many it holds when no {@code limit}
     * is given (also without any parameter: the list is always paged).
     */
    static final int MAX_PAGE = 500;
    /**
     * Most bytes of allocations one page holds (the JSON of its allocations, each bounded by
     * {@link Views#MAX_FIELD_BYTES} and {@link Views#MAX_LABELS}); a page ends early rather than pass it, and always
     * holds at least one allocation when any is left.
     */
    static final int MAX_PAGE_BYTES = 512 * 1024;
    /**
     * The order of pages: by id, an id {@code <prefix>-<sequence>} by prefix, then by its sequence as a number
     * (so one process's allocations oldest first); a total order on any strings, so a cursor need not be live.
     */
    static final Comparator<String> PAGE_ORDER = (a, b) -> {
        int da = a.lastIndexOf('-');
        int db = b.lastIndexOf('-');
        int c = (da < 0 ? a : a.substring(0, da)).compareTo(db < 0 ? b : b.substring(0, db));
        if (c != 0) {
            return c;
        }
        String sa = da < 0 ? "" : a.substring(da + 1);
        String sb = db < 0 ? "" : b.substring(db + 1);
        c = Integer.compare(da < 0 ? -1 : sa.length(), db < 0 ? -1 : sb.length());
        return c != 0 ? c : sa.compareTo(sb);
    };

    /** Longest {@code after} cursor accepted. */
    static final int MAX_CURSOR_CHARS = 256;

    private final GpuScheduler scheduler;
    private final NodeWatcher watcher;
    private final ConsoleMeters meters;
    private final int maxBodyBytes;

    AllocationsHandler(GpuScheduler scheduler, NodeWatcher watcher, ConsoleMeters meters, int maxBodyBytes) {
        this.scheduler = scheduler;
        this.watcher = watcher;
        this.meters = meters;
        this.maxBodyBytes = maxBodyBytes;
    }

    @Override
    public void handle(HttpExchange ex) throws IOException {
        String path = ex.getRequestURI().getRawPath();
        String method = ex.getRequestMethod();
        if (path.equals(PATH)) {
            if (method.equals("POST")) {
                allocate(ex);
            } else {
                Exchanges.get(ex, () -> list(ex));
            }
            return;
        }
        String id = URLDecoder.decode(path.substring(PREFIX.length()), StandardCharsets.UTF_8);
        if (method.equals("DELETE")) {
            release(ex, id);
        } else {
            Exchanges.get(ex, () -> {
                Optional<Allocation> a = scheduler.allocation(id);
                if (a.isPresent()) {
                    Exchanges.json(ex, 200, Views.allocation(a.get()));
                } else {
                    Exchanges.error(ex, 404, "no allocation \"" + id + "\"", "UNKNOWN_ALLOCATION");
                }
            });
        }
    }

    /**
     * The live allocations, one page in {@link #PAGE_ORDER}, without parameters too: {@code limit} 1 to
     * {@value #MAX_PAGE} (default {@value #MAX_PAGE}), and never more than {@value #MAX_PAGE_BYTES} bytes of
     * allocations (the page ends early rather than pass them). {@code X-Total-Count} says how many there are (holding
     * {@code device}, when given); where allocations follow the page, a {@code Link: <...>; rel="next"} header names
     * the next page by cursor, and only then. {@code after=<id>} (a cursor: the allocations after that id in page
     * order, whether or not it is still live) loses none when others end between pages; {@code offset=N} (an index)
     * still works, but shifts when an allocation before it ends; {@code device=<index>} keeps those holding that GPU.
     * The event stream's {@code state} event names the page, by cursor, where the allocations it leaves out start.
     */
    private void list(HttpExchange ex) throws IOException {
        Map<String, String> q = Exchanges.query(ex, "after", "offset", "limit", "device");
        if (q.containsKey("after") && q.containsKey("offset")) {
            throw new Exchanges.BadQuery("after and offset are both given; give after=<allocation id> (a cursor) or"
                    + " offset=<index>, not both");
        }
        String after = q.get("after");
        if (after != null && (after.isEmpty() || after.length() > MAX_CURSOR_CHARS)) {
            throw new Exchanges.BadQuery("after=" + SampleHistory.printable(after) + " is not valid; after is an"
                    + " allocation id of 1 to " + MAX_CURSOR_CHARS + " characters");
        }
        long offset = q.containsKey("offset") ? number(q.get("offset"), "offset", 0, Integer.MAX_VALUE) : 0;
        long limit = q.containsKey("limit") ? number(q.get("limit"), "limit", 1, MAX_PAGE) : MAX_PAGE;
        Integer device = q.containsKey("device")
                ? NodeViewsHandler.deviceIndex("device", q.get("device"), scheduler.inventory()) : null;
        List<Allocation> ordered = new ArrayList<>(scheduler.allocations());
        if (device != null) {
            ordered.removeIf(a -> !a.deviceIndices().contains(device));
        }
        ex.getResponseHeaders().set("X-Total-Count", Integer.toString(ordered.size()));
        ordered.sort(Comparator.comparing(Allocation::id, PAGE_ORDER));
        if (after != null) {
            ordered.removeIf(a -> PAGE_ORDER.compare(a.id(), after) <= 0);
        }
        List<Map<String, Object>> page = new ArrayList<>();
        long bytes = 0;
        for (int i = (int) Math.min(offset, ordered.size()); i < ordered.size() && page.size() < limit; i++) {
            Map<String, Object> v = Views.allocation(ordered.get(i));
            long n = Views.json(v).getBytes(StandardCharsets.UTF_8).length + 1L;
            if (!page.isEmpty() && bytes + n > MAX_PAGE_BYTES) {
                break;
            }
            page.add(v);
            bytes += n;
        }
        int next = (int) Math.min(offset, ordered.size()) + page.size();
        if (next < ordered.size()) {
            String last = ordered.get(next - 1).id();
            ex.getResponseHeaders().set("Link", "<" + PATH + "?after=" + URLEncoder.encode(last, StandardCharsets.UTF_8)
                    + "&limit=" + limit + (device == null ? "" : "&device=" + device) + ">; rel=\"next\"");
        }
        Exchanges.json(ex, 200, page);
    }

    /** @return the page after {@code lastId} (the cursor the state event's truncated marker names) */
    static String pageAfter(String lastId) {
        return PATH + "?after=" + URLEncoder.encode(lastId, StandardCharsets.UTF_8) + "&limit=" + MAX_PAGE;
    }

    /** @return {@code s} as a number from {@code min} to {@code max}, in ASCII digits only */
    private static long number(String s, String name, long min, long max) {
        boolean digits = !s.isEmpty() && s.length() <= 10 && s.chars().allMatch(c -> c >= '0' && c <= '9');
        long n = digits ? Long.parseLong(s) : -1;
        if (!digits || n < min || n > max) {
            throw new Exchanges.BadQuery(name + "=" + SampleHistory.printable(s) + " is not valid; " + name + " is a"
                    + " number from " + min + " to " + max + " in ASCII digits");
        }
        return n;
    }

    private void allocate(HttpExchange ex) throws IOException {
        byte[] body = Exchanges.readBody(ex, maxBodyBytes);
        GpuRequest request;
        try {
            request = parseRequest(body);
        } catch (GpuException | IllegalArgumentException e) {
            Exchanges.error(ex, 400, e.getMessage(),
                    e instanceof GpuAllocationException g ? g.reason().name() : null);
            return;
        }
        long start = System.nanoTime();
        try {
            Allocation a = scheduler.allocate(request);
            meters.recordAllocate(Duration.ofNanos(System.nanoTime() - start));
            watcher.pushStateIfChanged();
            ex.getResponseHeaders().set("Location", PREFIX + a.id());
            Exchanges.json(ex, 201, Views.allocation(a));
        } catch (GpuAllocationException e) {
            meters.recordAllocate(Duration.ofNanos(System.nanoTime() - start));
            int status = e.reason() == GpuAllocationException.Reason.RATE_LIMITED ? 429
                    : e.reason() == GpuAllocationException.Reason.INVALID_REQUEST ? 400 : 409;
            Exchanges.error(ex, status, e);
        }
    }

    private void release(HttpExchange ex, String id) throws IOException {
        Exchanges.drain(ex, maxBodyBytes);
        try {
            boolean released = scheduler.release(id);
            watcher.pushStateIfChanged();
            Exchanges.json(ex, 200, Map.of("id", id, "released", released));
        } catch (GpuAllocationException e) {
            Exchanges.error(ex, e.reason() == GpuAllocationException.Reason.UNKNOWN_ALLOCATION ? 404 : 409,
                    e.getMessage(), e.reason().name());
        } catch (GpuException | IllegalArgumentException e) {
            Exchanges.error(ex, 404, e.getMessage(), null);
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
                    .with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                    .with(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
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
            return NodeNames.requireLocalTarget(GpuRequests.fromCliFlags(flags));
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
}
