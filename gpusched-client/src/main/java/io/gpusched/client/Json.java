package io.gpusched.client;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectReader;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Reads the service's JSON strictly: one document (nothing after it, no key twice, nesting and text bounded), and each
 * field of the type the contract gives it; anything else is a {@link NodeServiceException} ({@code BAD_ANSWER})
 * naming the field. The client's own copy of the mapper (gpu-core's internal one is not API).
 */
final class Json {
    /** The most deeply a document may nest. */
    static final int MAX_DEPTH = 64;

    static final ObjectMapper MAPPER = JsonMapper.builder(JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_DEPTH)
                    .maxNumberLength(40).maxStringLength(16 * 1024 * 1024).build())
            .build()).build();
    private static final ObjectReader READER = MAPPER.reader()
            .with(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .with(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);

    private final Path socket;
    private final String what;

    /**
     * @param socket the service's socket (for messages)
     * @param what   what is being read, e.g. {@code "GET /api/v1/node"}
     */
    Json(Path socket, String what) {
        this.socket = socket;
        this.what = what;
    }

    /** @return the document in {@code body} */
    JsonNode parse(byte[] body) {
        try {
            JsonNode n = READER.readTree(body);
            if (n == null || n.isMissingNode()) {
                throw bad("an empty answer");
            }
            return n;
        } catch (JsonProcessingException e) {
            throw bad("an answer that is not JSON (" + e.getOriginalMessage() + ")");
        } catch (IOException e) {
            throw bad("an answer that cannot be read (" + e.getMessage() + ")");
        }
    }

    /** @return the document in {@code text} */
    JsonNode parse(String text) {
        try {
            JsonNode n = READER.readTree(text);
            if (n == null || n.isMissingNode()) {
                throw bad("an empty line");
            }
            return n;
        } catch (JsonProcessingException e) {
            throw bad("a line that is not JSON (" + e.getOriginalMessage() + ")");
        }
    }

    /** @return what is being read, e.g. {@code "GET /api/v1/node"} */
    String what() {
        return what;
    }

    NodeServiceException bad(String found) {
        return new NodeServiceException(NodeServiceException.Kind.BAD_ANSWER, socket, 0, "BAD_ANSWER",
                "the node service on " + socket + " answered " + what + " with " + found
                        + "; is it the same gpusched version as this client?",
                null);
    }

    JsonNode object(JsonNode n, String field) {
        if (n == null || !n.isObject()) {
            throw bad(field + " that is not a JSON object");
        }
        return n;
    }

    List<JsonNode> array(JsonNode n, String field) {
        if (n == null || !n.isArray()) {
            throw bad(field + " that is not a JSON array");
        }
        List<JsonNode> out = new ArrayList<>(n.size());
        n.forEach(out::add);
        return out;
    }

    private JsonNode field(JsonNode o, String name, boolean required) {
        object(o, "a value holding \"" + name + "\"");
        JsonNode v = o.get(name);
        if (v == null || v.isNull()) {
            if (required) {
                throw bad("no \"" + name + "\"");
            }
            return null;
        }
        return v;
    }

    String text(JsonNode o, String name) {
        JsonNode v = field(o, name, true);
        if (!v.isTextual()) {
            throw bad("\"" + name + "\" that is not a string");
        }
        return v.asText();
    }

    String textOrNull(JsonNode o, String name) {
        JsonNode v = field(o, name, false);
        if (v == null) {
            return null;
        }
        if (!v.isTextual()) {
            throw bad("\"" + name + "\" that is not a string or null");
        }
        return v.asText();
    }

    boolean bool(JsonNode o, String name, Optional<Boolean> absent) {
        JsonNode v = field(o, name, absent.isEmpty());
        if (v == null) {
            return absent.get();
        }
        if (!v.isBoolean()) {
            throw bad("\"" + name + "\" that is not true or false");
        }
        return v.asBoolean();
    }

    long integer(JsonNode o, String name) {
        return integer(field(o, name, true), name, Long.MIN_VALUE, Long.MAX_VALUE);
    }

    Long integerOrNull(JsonNode o, String name) {
        JsonNode v = field(o, name, false);
        return v == null ? null : integer(v, name, Long.MIN_VALUE, Long.MAX_VALUE);
    }

    int int32(JsonNode o, String name, int min, int max) {
        return (int) integer(field(o, name, true), name, min, max);
    }

    Integer int32OrNull(JsonNode o, String name, int min, int max) {
        JsonNode v = field(o, name, false);
        return v == null ? null : (int) integer(v, name, min, max);
    }

    long integer(JsonNode v, String name, long min, long max) {
        if (!v.isIntegralNumber() || !v.canConvertToLong()) {
            throw bad("\"" + name + "\" that is not a whole number");
        }
        long x = v.asLong();
        if (x < min || x > max) {
            throw bad("\"" + name + "\" = " + x + ", outside " + min + ".." + max);
        }
        return x;
    }

    Double numberOrNull(JsonNode o, String name) {
        JsonNode v = field(o, name, false);
        if (v == null) {
            return null;
        }
        if (!v.isNumber()) {
            throw bad("\"" + name + "\" that is not a number");
        }
        return v.asDouble();
    }

    List<Integer> ints(JsonNode o, String name, boolean nullsAllowed) {
        List<Integer> out = new ArrayList<>();
        for (JsonNode e : array(field(o, name, true), "\"" + name + "\"")) {
            if (e.isNull() && nullsAllowed) {
                out.add(null);
            } else {
                out.add((int) integer(e, name + "[]", nullsAllowed ? Integer.MIN_VALUE : 0, Integer.MAX_VALUE));
            }
        }
        return out;
    }

    List<String> texts(JsonNode o, String name, boolean required) {
        JsonNode v = field(o, name, required);
        if (v == null) {
            return null;
        }
        List<String> out = new ArrayList<>();
        for (JsonNode e : array(v, "\"" + name + "\"")) {
            if (!e.isTextual()) {
                throw bad("\"" + name + "\" with an element that is not a string");
            }
            out.add(e.asText());
        }
        return out;
    }

    Map<String, String> textMap(JsonNode o, String name) {
        JsonNode v = field(o, name, false);
        Map<String, String> out = new LinkedHashMap<>();
        if (v == null) {
            return out;
        }
        object(v, "\"" + name + "\"");
        for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw bad("\"" + name + "\" with a value that is not a string (" + Answer.show(e.getKey()) + ")");
            }
            out.put(e.getKey(), e.getValue().asText());
        }
        return out;
    }
}
