package io.gpusched.service;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.host.NodeNames;
import io.gpusched.core.internal.Durations;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The request bodies the service reads from any local user: strict JSON (no duplicate keys, nothing after the
 * object, at most {@link #MAX_DEPTH} levels), only the documented fields, each of its documented type. Every refusal
 * is an {@link IllegalArgumentException} naming the field and what is valid (answered {@code 400 INVALID_REQUEST});
 * no other exception leaves these parsers, for any input (fuzzed: {@code ServiceParsersFuzzTest}).
 */
final class Requests {
    /** Deepest nesting accepted. */
    static final int MAX_DEPTH = 8;
    private static final ObjectMapper MAPPER = new ObjectMapper();

    static {
        MAPPER.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_DEPTH)
                .maxStringLength(1 << 20).maxNumberLength(64).build());
    }

    private Requests() {
    }

    /**
     * An allocation request: {@code {"flags": [...]}} or {@code {"resources": {...}}}, with an optional
     * {@code "wait": "10m"}.
     *
     * @param request what to allocate (its owner, if any, as the request named it)
     * @param maxWait how long to queue for busy GPUs; empty: refuse at once
     */
    record Allocate(GpuRequest request, Optional<Duration> maxWait) {
    }

    /**
     * A job: {@code {"flags", "cuda", "argv", "env", "cwd", "detach", "wait"}}.
     *
     * @param request what to allocate
     * @param cuda    a CUDA requirement, if any
     * @param argv    the command
     * @param env     the environment to start it with
     * @param cwd     the working directory (absolute)
     * @param detach  whether it runs without a client attached
     * @param maxWait how long to queue for busy GPUs; empty: refuse at once
     */
    record Job(GpuRequest request, Optional<String> cuda, List<String> argv, Map<String, String> env, String cwd,
            boolean detach, Optional<Duration> maxWait) {
    }

    static JsonNode object(byte[] body, String what) {
        JsonNode root;
        try {
            root = MAPPER.reader().with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                    .with(JsonParser.Feature.STRICT_DUPLICATE_DETECTION).readTree(body);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("the request body is not JSON: " + printable(e.getOriginalMessage()));
        } catch (IOException | RuntimeException e) {
            throw new IllegalArgumentException("the request body is not JSON: " + printable(String.valueOf(
                    e.getMessage())));
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException("the request body must be a JSON object: " + what);
        }
        return root;
    }

    private static void onlyKeys(JsonNode root, Set<String> allowed, String what) {
        List<String> unknown = new ArrayList<>();
        root.fieldNames().forEachRemaining(k -> {
            if (!allowed.contains(k)) {
                unknown.add(printable(k));
            }
        });
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown field(s) " + unknown + "; " + what + " takes "
                    + allowed.stream().sorted().toList());
        }
    }

    private static final Set<String> ALLOCATE_KEYS = Set.of("flags", "resources", "wait");
    private static final String ALLOCATE = "{\"flags\": [\"--gpu=2\", ...]} or {\"resources\": {\"gpu_count\": 2}},"
            + " with an optional \"wait\": \"10m\"";

    /** @throws IllegalArgumentException naming the field that is not valid */
    static Allocate allocate(byte[] body) {
        JsonNode root = object(body, ALLOCATE);
        onlyKeys(root, ALLOCATE_KEYS, "an allocation");
        if (root.has("flags") == root.has("resources")) {
            throw new IllegalArgumentException("give exactly one of \"flags\" or \"resources\": " + ALLOCATE);
        }
        GpuRequest r = root.has("flags") ? flags(root.get("flags")) : resources(root.get("resources"));
        return new Allocate(r, waitOf(root));
    }

    private static final Set<String> JOB_KEYS = Set.of("flags", "cuda", "argv", "env", "cwd", "detach", "wait");

    /** @throws IllegalArgumentException naming the field that is not valid */
    static Job job(byte[] body) {
        JsonNode root = object(body, "a job: {\"flags\": [...], \"argv\": [...], \"env\": {...}, \"cwd\": \"/...\"}");
        onlyKeys(root, JOB_KEYS, "a job");
        GpuRequest r = flags(root.has("flags") ? root.get("flags") : MAPPER.createArrayNode());
        Optional<String> cuda = Optional.empty();
        if (root.has("cuda") && !root.get("cuda").isNull()) {
            cuda = Optional.of(text(root.get("cuda"), "cuda", 64));
        }
        JsonNode a = root.get("argv");
        if (a == null || !a.isArray() || a.isEmpty()) {
            throw new IllegalArgumentException("\"argv\" must be a non-empty array of strings: the command and its"
                    + " arguments");
        }
        List<String> argv = new ArrayList<>();
        for (int i = 0; i < a.size(); i++) {
            argv.add(text(a.get(i), "argv[" + i + "]", 1 << 18));
        }
        Map<String, String> env = new LinkedHashMap<>();
        JsonNode e = root.get("env");
        if (e != null && !e.isNull()) {
            if (!e.isObject()) {
                throw new IllegalArgumentException(
                        "\"env\" must be an object of strings, e.g. {\"HOME\": \"/home/alice\"}");
            }
            var it = e.fields();
            while (it.hasNext()) {
                var f = it.next();
                env.put(f.getKey(), text(f.getValue(), "env." + printable(f.getKey()), 1 << 18));
            }
        }
        JsonNode c = root.get("cwd");
        if (c == null) {
            throw new IllegalArgumentException("\"cwd\" is required: the absolute working directory to start in");
        }
        String cwd = text(c, "cwd", 4096);
        if (!cwd.startsWith("/") || cwd.indexOf('\0') >= 0) {
            throw new IllegalArgumentException("\"cwd\" must be an absolute path without NUL, was \"" + printable(cwd)
                    + "\"");
        }
        boolean detach = false;
        JsonNode d = root.get("detach");
        if (d != null && !d.isNull()) {
            if (!d.isBoolean()) {
                throw new IllegalArgumentException("\"detach\" must be true or false");
            }
            detach = d.booleanValue();
        }
        return new Job(r, cuda, argv, env, cwd, detach, waitOf(root));
    }

    /** {@code {"lease": "2h"}} @throws IllegalArgumentException naming the field that is not valid */
    static Duration lease(byte[] body) {
        JsonNode root = object(body, "{\"lease\": \"2h\"}");
        onlyKeys(root, Set.of("lease"), "a renewal");
        if (!root.has("lease")) {
            throw new IllegalArgumentException("\"lease\" is required, e.g. {\"lease\": \"2h\"}");
        }
        Duration d = duration(root.get("lease"), "lease");
        if (d.isZero()) {
            throw new IllegalArgumentException("\"lease\" must be positive");
        }
        return d;
    }

    /** {@code {"signal": "INT"}} @throws IllegalArgumentException naming the field that is not valid */
    static String signal(byte[] body) {
        JsonNode root = object(body, "{\"signal\": \"INT\"}");
        onlyKeys(root, Set.of("signal"), "a signal");
        if (!root.has("signal")) {
            throw new IllegalArgumentException("\"signal\" is required: INT, TERM, KILL, HUP, USR1, USR2 or QUIT");
        }
        return text(root.get("signal"), "signal", 16);
    }

    /** {@code {"reason": "..."}} or an empty body @throws IllegalArgumentException naming the field */
    static String reason(byte[] body) {
        if (body.length == 0) {
            return "";
        }
        JsonNode root = object(body, "{\"reason\": \"...\"}");
        onlyKeys(root, Set.of("reason"), "a drain");
        return root.has("reason") && !root.get("reason").isNull() ? text(root.get("reason"), "reason", 512) : "";
    }

    private static Optional<Duration> waitOf(JsonNode root) {
        JsonNode w = root.get("wait");
        if (w == null || w.isNull()) {
            return Optional.empty();
        }
        return Optional.of(duration(w, "wait"));
    }

    private static Duration duration(JsonNode n, String field) {
        String s = text(n, field, 32);
        try {
            return Durations.parse(s);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("\"" + field + "\": " + e.getMessage());
        }
    }

    private static GpuRequest flags(JsonNode f) {
        if (!f.isArray()) {
            throw new IllegalArgumentException("\"flags\" must be an array of strings such as \"--gpu=2\"");
        }
        List<String> flags = new ArrayList<>();
        for (int i = 0; i < f.size(); i++) {
            flags.add(text(f.get(i), "flags[" + i + "]", 4096));
        }
        try {
            return NodeNames.requireLocalTarget(GpuRequests.fromCliFlags(flags));
        } catch (GpuException e) {
            throw new IllegalArgumentException("\"flags\": " + e.getMessage());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("\"flags\": " + e.getMessage());
        }
    }

    private static GpuRequest resources(JsonNode r) {
        if (!r.isObject()) {
            throw new IllegalArgumentException("\"resources\" must be an object such as {\"gpu_count\": 2}");
        }
        Map<String, Object> map = new LinkedHashMap<>();
        var it = r.fields();
        while (it.hasNext()) {
            var f = it.next();
            JsonNode v = f.getValue();
            Object value = v.isTextual() ? v.textValue() : v.isIntegralNumber() && v.canConvertToLong() ? (Object) v
                    .longValue() : v.isNumber() ? (Object) v.doubleValue() : v.isBoolean() ? (Object) v.booleanValue()
                    : null;
            if (value == null) {
                throw new IllegalArgumentException("\"resources." + printable(f.getKey()) + "\" must be a string,"
                        + " number or boolean");
            }
            map.put(f.getKey(), value);
        }
        try {
            return GpuRequests.fromResources(map).orElseThrow(() -> new IllegalArgumentException(
                    "\"resources\" asks for no GPU (gpu_count missing or 0)"));
        } catch (GpuException e) {
            throw new IllegalArgumentException("\"resources\": " + e.getMessage());
        }
    }

    private static String text(JsonNode n, String field, int max) {
        if (n == null || !n.isTextual()) {
            throw new IllegalArgumentException("\"" + field + "\" must be a string");
        }
        String s = n.textValue();
        if (s.length() > max) {
            throw new IllegalArgumentException("\"" + field + "\" is " + s.length() + " characters long; at most "
                    + max);
        }
        return s;
    }

    static String printable(String s) {
        if (s == null) {
            return "null";
        }
        String t = s.length() > 200 ? s.substring(0, 200) + "..." : s;
        return t.replaceAll("[^\\x20-\\x7e]", "?");
    }
}
