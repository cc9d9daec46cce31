package io.gpusched.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.LedgerException;
import java.nio.charset.StandardCharsets;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The service's answers, read into the library's values: allocations and devices in gpu-core's one shape
 * ({@link AllocationView}, {@link DeviceView}), the client's values for the rest, and error answers turned back into
 * the typed exceptions they were on the service's side. What does not fit the contract is a
 * {@link NodeServiceException} ({@code BAD_ANSWER}) naming the field.
 */
final class Replies {
    private final Json json;
    private final Path socket;

    Replies(Path socket, String what) {
        this.socket = socket;
        this.json = new Json(socket, what);
    }

    Json json() {
        return json;
    }

    AllocationView allocation(JsonNode o) {
        json.object(o, "an allocation");
        try {
            return new AllocationView(json.text(o, "id"), json.textOrNull(o, "owner"),
                    json.integerOrNull(o, "ownerUid"), json.textOrNull(o, "jobId"), json.ints(o, "devices", false),
                    json.texts(o, "uuids", true), json.text(o, "sharing"), json.integerOrNull(o, "sharedMemoryBytes"),
                    json.text(o, "createdAt"), json.textOrNull(o, "expiresAt"),
                    json.bool(o, "expired", Optional.of(false)), json.integerOrNull(o, "holderPid"),
                    json.textMap(o, "labels"), json.textOrNull(o, "placement"));
        } catch (IllegalArgumentException e) {
            throw json.bad("an allocation that does not hold together (" + e.getMessage() + ")");
        }
    }

    List<AllocationView> allocations(JsonNode a) {
        List<AllocationView> out = new ArrayList<>();
        for (JsonNode n : json.array(a, "the allocations")) {
            out.add(allocation(n));
        }
        return out;
    }

    DeviceView device(JsonNode o) {
        json.object(o, "a device");
        List<AllocationView> holders = new ArrayList<>();
        JsonNode h = o.get("holders");
        if (h != null && !h.isNull()) {
            holders = allocations(h);
        }
        return new DeviceView(json.int32(o, "index", 0, Integer.MAX_VALUE), json.text(o, "uuid"),
                json.text(o, "name"), json.text(o, "vendor"), json.textOrNull(o, "pciBusId"),
                json.integerOrNull(o, "memoryTotalBytes"), json.integerOrNull(o, "memoryUsedBytes"),
                json.numberOrNull(o, "utilizationPercent"), json.numberOrNull(o, "temperatureCelsius"),
                json.numberOrNull(o, "powerWatts"), json.text(o, "health"), json.textOrNull(o, "healthReason"),
                json.text(o, "pool"), json.textOrNull(o, "poolReason"), json.integerOrNull(o, "reservableBytes"),
                holders);
    }

    /**
     * @return how many allocations hold the device {@code o} ({@code holdersTotal}, where the service lists only the
     *     first of them), or -1 when the answer does not say (an older service's: its list is whole)
     */
    long holdersTotal(JsonNode o) {
        Long total = json.integerOrNull(json.object(o, "a device"), "holdersTotal");
        if (total != null && total < 0) {
            throw json.bad("\"holdersTotal\" = " + total + ", below 0");
        }
        return total == null ? -1 : total;
    }

    List<DeviceView> devices(JsonNode a) {
        List<DeviceView> out = new ArrayList<>();
        for (JsonNode n : json.array(a, "the devices")) {
            out.add(device(n));
        }
        return out;
    }

    NodeInfo node(JsonNode o) {
        json.object(o, "the node");
        List<String> notes = json.texts(o, "notes", false);
        return new NodeInfo(json.text(o, "hostname"), json.text(o, "backend"),
                json.bool(o, "simulated", Optional.empty()), json.int32(o, "gpus", 0, Integer.MAX_VALUE),
                json.text(o, "strategy"), json.text(o, "version"), Optional.ofNullable(json.textOrNull(o, "stateDir")),
                json.bool(o, "enabled", Optional.of(true)), json.bool(o, "drainSupported", Optional.of(false)),
                notes == null ? List.of() : notes);
    }

    Topology topology(JsonNode o) {
        json.object(o, "the topology");
        List<List<String>> matrix = new ArrayList<>();
        for (JsonNode row : json.array(o.get("matrix"), "\"matrix\"")) {
            List<String> r = new ArrayList<>();
            for (JsonNode cell : json.array(row, "a row of \"matrix\"")) {
                if (!cell.isTextual()) {
                    throw json.bad("\"matrix\" with a cell that is not a string");
                }
                r.add(cell.asText());
            }
            matrix.add(r);
        }
        List<Integer> devices = json.ints(o, "devices", false);
        if (matrix.size() != devices.size()) {
            throw json.bad("a topology of " + devices.size() + " devices and " + matrix.size() + " rows");
        }
        return new Topology(devices, matrix, json.ints(o, "numa", true), json.text(o, "legend"));
    }

    Identity identity(JsonNode o) {
        json.object(o, "the caller");
        List<String> groups = json.texts(o, "groups", false);
        return new Identity(json.integer(o, "uid"), json.integer(o, "gid"), json.text(o, "user"),
                groups == null ? List.of() : groups, json.bool(o, "admin", Optional.empty()));
    }

    List<QueueEntry> queue(JsonNode a) {
        List<QueueEntry> out = new ArrayList<>();
        for (JsonNode o : json.array(a, "the queue")) {
            json.object(o, "a queue entry");
            JsonNode r = o.get("request");
            String request = r == null || r.isNull() ? "" : r.isTextual() ? r.asText() : r.toString();
            out.add(new QueueEntry(json.int32(o, "position", 0, Integer.MAX_VALUE), json.text(o, "user"),
                    json.integerOrNull(o, "uid"), request, json.text(o, "since")));
        }
        return out;
    }

    JobView job(JsonNode o) {
        json.object(o, "a job");
        JsonNode d = o.get("devices");
        return new JobView(json.text(o, "id"), json.text(o, "owner"), json.integerOrNull(o, "uid"),
                json.text(o, "state"), json.textOrNull(o, "allocationId"),
                d == null || d.isNull() ? List.of() : json.ints(o, "devices", false), json.textOrNull(o, "createdAt"),
                json.textOrNull(o, "startedAt"), json.textOrNull(o, "endedAt"),
                json.int32OrNull(o, "exitCode", Integer.MIN_VALUE, Integer.MAX_VALUE), json.textOrNull(o, "signal"),
                json.bool(o, "detached", Optional.of(false)), json.textOrNull(o, "cgroup"),
                json.texts(o, "argv", false), json.textOrNull(o, "cwd"), json.textOrNull(o, "output"));
    }

    List<JobView> jobs(JsonNode a) {
        List<JobView> out = new ArrayList<>();
        for (JsonNode n : json.array(a, "the jobs")) {
            out.add(job(n));
        }
        return out;
    }

    AllocationEnvironment environment(JsonNode o, String id) {
        json.object(o, "the environment");
        Map<String, List<String>> prepends = new LinkedHashMap<>();
        JsonNode p = o.get("pathPrepends");
        if (p != null && !p.isNull()) {
            json.object(p, "\"pathPrepends\"");
            for (Iterator<String> it = p.fieldNames(); it.hasNext();) {
                String k = it.next();
                prepends.put(k, json.texts(p, k, true));
            }
        }
        Optional<AllocationEnvironment.Installation> installation = Optional.empty();
        JsonNode i = o.get("installation");
        if (i != null && !i.isNull()) {
            installation = Optional.of(new AllocationEnvironment.Installation(json.text(i, "root"),
                    Optional.ofNullable(json.textOrNull(i, "version"))));
        }
        Optional<String> compatibility = Optional.empty();
        JsonNode c = o.get("compatibility");
        if (c != null && !c.isNull()) {
            compatibility = Optional.of(json.text(c, "verdict"));
        }
        List<String> notes = json.texts(o, "notes", false);
        List<String> docker = List.of();
        List<String> cdi = List.of();
        Optional<String> problem = Optional.of("the service gave no container flags");
        JsonNode container = o.get("container");
        if (container != null && !container.isNull()) {
            json.object(container, "\"container\"");
            docker = Optional.ofNullable(json.texts(container, "dockerArgs", false)).orElse(List.of());
            cdi = Optional.ofNullable(json.texts(container, "cdiArgs", false)).orElse(List.of());
            problem = Optional.ofNullable(json.textOrNull(container, "error"));
        }
        String allocation = Optional.ofNullable(json.textOrNull(o, "allocation")).orElse(id);
        return new AllocationEnvironment(allocation, json.textMap(o, "variables"), prepends, installation,
                compatibility, notes == null ? List.of() : notes, docker, cdi, problem);
    }

    /**
     * Turns an error answer back into the exception it was on the service's side: a refusal with a reason of
     * {@link GpuAllocationException.Reason} is that; {@code 403} is an {@link AccessDeniedException} (holder and who
     * may act kept); a ledger error's kind is a {@link LedgerException}; {@code 400} without a reason is an
     * {@link IllegalArgumentException} (a request the service could not read); any other is a
     * {@link NodeServiceException} ({@code REFUSED}) with the service's reason code.
     *
     * @param status  the HTTP status
     * @param body    the answer's body
     * @param action  what was asked ({@code release}), for an access refusal that does not say
     * @param subject what it was asked on (an id), likewise
     * @return the exception to throw
     */
    /**
     * @return the obstacles a refusal carries ({@code [{"deviceIndex", "uuid", "kind", "detail"}]}); an entry of
     *     another shape is left out (the message still names the first few)
     */
    static List<GpuAllocationException.Obstacle> obstacles(JsonNode a) {
        List<GpuAllocationException.Obstacle> out = new ArrayList<>();
        if (a == null || !a.isArray()) {
            return out;
        }
        for (JsonNode o : a) {
            if (!o.path("deviceIndex").isInt() || !o.path("uuid").isTextual() || !o.path("kind").isTextual()
                    || !o.path("detail").isTextual()) {
                continue;
            }
            for (GpuAllocationException.Obstacle.Kind k : GpuAllocationException.Obstacle.Kind.values()) {
                if (k.name().equals(o.get("kind").asText())) {
                    out.add(new GpuAllocationException.Obstacle(o.get("deviceIndex").asInt(), o.get("uuid").asText(),
                            k, o.get("detail").asText()));
                }
            }
        }
        return out;
    }

    RuntimeException error(int status, byte[] body, String action, String subject) {
        String message;
        String reason = null;
        JsonNode o = null;
        try {
            o = json.parse(body);
        } catch (NodeServiceException notJson) {
            o = null;
        }
        if (o != null && o.isObject() && o.path("error").isTextual()) {
            message = o.get("error").asText();
            reason = o.path("reason").isTextual() ? o.get("reason").asText() : null;
        } else {
            String text = new String(body, 0, Math.min(body.length, 300), StandardCharsets.UTF_8).strip();
            return new NodeServiceException(NodeServiceException.Kind.REFUSED, socket, status, "HTTP_" + status,
                    "the node service on " + socket + " answered " + status + " to " + json.what()
                            + (text.isEmpty() ? "" : ": " + Answer.show(text)),
                    null);
        }
        if (reason != null) {
            for (GpuAllocationException.Reason r : GpuAllocationException.Reason.values()) {
                if (r.name().equals(reason)) {
                    return new GpuAllocationException(r, message, obstacles(o.path("obstacles")));
                }
            }
            for (LedgerException.Kind k : LedgerException.Kind.values()) {
                if (k.name().equals(reason)) {
                    return new LedgerException(k, ledgerPath(o), message, null);
                }
            }
        }
        if (status == 403 || "FORBIDDEN".equals(reason)) {
            List<String> mayAct = new ArrayList<>();
            JsonNode m = o.get("mayAct");
            if (m != null && m.isArray()) {
                m.forEach(x -> {
                    if (x.isTextual()) {
                        mayAct.add(x.asText());
                    }
                });
            }
            JsonNode h = o.get("holder");
            return new AccessDeniedException(o.path("action").isTextual() ? o.get("action").asText() : action,
                    o.path("subject").isTextual() ? o.get("subject").asText() : subject,
                    h != null && h.isTextual() ? Optional.of(h.asText()) : Optional.empty(), mayAct, message);
        }
        if (status == 400 && reason == null) {
            return new IllegalArgumentException(message);
        }
        return new NodeServiceException(NodeServiceException.Kind.REFUSED, socket, status,
                reason == null ? "HTTP_" + status : reason, message, null);
    }

    private Path ledgerPath(JsonNode o) {
        JsonNode p = o.get("path");
        if (p != null && p.isTextual()) {
            try {
                return Path.of(p.asText());
            } catch (InvalidPathException e) {
                return socket;
            }
        }
        return socket;
    }
}
