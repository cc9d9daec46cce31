package io.gpusched.core;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.core.DeviceState.Pool;
import io.gpusched.core.internal.Json;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeMap;

/**
 * One change as the node ledger records it. Every record is applied by {@link NodeState#apply} in the same way
 * whether this process made it or caught up with it from another process. Times keep their nanoseconds and lease
 * lengths are stored in nanoseconds, so a sub-millisecond lease survives a restart.
 */
sealed interface LedgerRecord {

    /** Why an allocation ended. */
    enum Cause {
        /** {@link GpuScheduler#release} was called. */
        RELEASED,
        /** Its lease ran out and {@code gpu.leases.release_on_expiry} is set. */
        EXPIRED,
        /** The process it was bound to is gone. */
        RECLAIMED
    }

    /**
     * Devices handed out; the allocation id is {@code <node prefix>-<sequence of this record>}.
     *
     * @param id        allocation id
     * @param uuids     device UUIDs in pick order
     * @param request   the request
     * @param createdAt when
     * @param expiresAt lease end
     * @param placement the strategy's certificate (written only when rated)
     * @param releaseOnExpiry the lease ends the allocation when it runs out (the allocating process had
     *                        {@code gpu.leases.release_on_expiry}): whichever process of the node changes or reads the
     *                        ledger next releases it; written {@code "expiry":"release"}
     */
    record Allocated(String id, List<String> uuids, GpuRequest request, Instant createdAt,
            Optional<Instant> expiresAt, PlacementQuality placement, boolean releaseOnExpiry) implements LedgerRecord {
        public Allocated {
            uuids = List.copyOf(uuids);
            Objects.requireNonNull(placement, "placement");
        }

        Allocated(String id, List<String> uuids, GpuRequest request, Instant createdAt, Optional<Instant> expiresAt,
                PlacementQuality placement) {
            this(id, uuids, request, createdAt, expiresAt, placement, false);
        }

        Allocated(String id, List<String> uuids, GpuRequest request, Instant createdAt, Optional<Instant> expiresAt) {
            this(id, uuids, request, createdAt, expiresAt, PlacementQuality.unrated());
        }
    }

    /**
     * The cgroup of the job using a live allocation, recorded once the holder has made it (its name is
     * {@code job-<id>}): a reclaim ends the cgroup's processes and removes it before the allocation's GPUs go to anyone
     * else.
     *
     * @param id     allocation id
     * @param cgroup the cgroup directory, absolute
     */
    record JobCgroup(String id, String cgroup) implements LedgerRecord {
        /** @throws IllegalArgumentException when the cgroup is not an absolute, normalized, printable path */
        public JobCgroup {
            Objects.requireNonNull(id, "id");
            GpuRequest.checkCgroup(cgroup);
        }
    }

    /**
     * The job's own process, for a job that runs without a cgroup (recorded once its host has started it): while it
     * lives, a release of the allocation is refused.
     *
     * @param id      allocation id
     * @param process the job's process (pid and start time)
     */
    record JobProcess(String id, HolderProcess process) implements LedgerRecord {
        public JobProcess {
            Objects.requireNonNull(id, "id");
            Objects.requireNonNull(process, "process");
        }
    }

    /**
     * An allocation ended.
     *
     * @param id         allocation id
     * @param cause      why
     * @param at         when
     * @param drain      UUIDs of devices that now drain (the releaser's inventory can list processes)
     * @param deadHolder the holder that was gone, for {@link Cause#RECLAIMED}
     */
    record Released(String id, Cause cause, Instant at, List<String> drain, Optional<HolderProcess> deadHolder)
            implements
                LedgerRecord {
        public Released {
            drain = List.copyOf(drain);
        }
    }

    /**
     * A lease was extended.
     *
     * @param id        allocation id
     * @param expiresAt new lease end
     */
    record Renewed(String id, Instant expiresAt) implements LedgerRecord {
    }

    /**
     * A device moved between the pool, draining and quarantine.
     *
     * @param uuid   device UUID
     * @param pool   new pool state
     * @param reason why (draining, quarantined)
     * @param since  since when
     */
    record PoolChanged(String uuid, Pool pool, Optional<String> reason, Optional<Instant> since)
            implements
                LedgerRecord {
    }

    /**
     * The whole state at one sequence: the first record of a compacted ledger.
     *
     * @param live   live allocations
     * @param pools  devices not in the pool
     * @param issued which sequences were allocations ({@link IssuedIds#encode}); absent in ledgers of 0.1
     */
    record Snapshot(List<Allocated> live, List<PoolChanged> pools, Optional<String> issued) implements LedgerRecord {
        public Snapshot {
            live = List.copyOf(live);
            pools = List.copyOf(pools);
        }

        Snapshot(List<Allocated> live, List<PoolChanged> pools) {
            this(live, pools, Optional.empty());
        }
    }

    // ------------------------------------------------------------------ JSON

    /** @return the record as one line of JSON (no newline) */
    static String toJson(LedgerRecord r) {
        try {
            return Json.MAPPER.writeValueAsString(toMap(r));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot encode " + r, e);
        }
    }

    /** @throws IllegalArgumentException if the JSON is not a record this version knows */
    static LedgerRecord fromJson(String json) {
        JsonNode n;
        try {
            n = Json.MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not JSON: " + e.getOriginalMessage(), e);
        }
        return fromNode(n);
    }

    private static Map<String, Object> toMap(LedgerRecord r) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (r instanceof Allocated a) {
            m.put("op", "A");
            m.put("id", a.id());
            m.put("devices", a.uuids());
            m.put("request", request(a.request()));
            m.put("createdAt", a.createdAt().toString());
            a.expiresAt().ifPresent(e -> m.put("expiresAt", e.toString()));
            if (a.placement().rated()) {
                m.put("placement", a.placement().provenOptimal() ? Map.of("optimal", true)
                        : Map.of("within", a.placement().withinPercent()));
            }
            if (a.releaseOnExpiry() && a.expiresAt().isPresent()) {
                m.put("expiry", "release");
            }
        } else if (r instanceof Released x) {
            m.put("op", "R");
            m.put("id", x.id());
            m.put("cause", x.cause().name());
            m.put("at", x.at().toString());
            if (!x.drain().isEmpty()) {
                m.put("drain", x.drain());
            }
            x.deadHolder().ifPresent(h -> m.put("holder", List.of(h.pid(), h.startTime())));
        } else if (r instanceof JobCgroup j) {
            m.put("op", "J");
            m.put("id", j.id());
            m.put("cgroup", j.cgroup());
        } else if (r instanceof JobProcess j) {
            m.put("op", "JP");
            m.put("id", j.id());
            m.put("process", List.of(j.process().pid(), j.process().startTime()));
        } else if (r instanceof Renewed x) {
            m.put("op", "N");
            m.put("id", x.id());
            m.put("expiresAt", x.expiresAt().toString());
        } else if (r instanceof PoolChanged p) {
            m.put("op", "P");
            m.put("device", p.uuid());
            m.put("pool", p.pool().name());
            p.reason().ifPresent(v -> m.put("reason", v));
            p.since().ifPresent(v -> m.put("since", v.toString()));
        } else if (r instanceof Snapshot s) {
            m.put("op", "S");
            m.put("live", s.live().stream().map(LedgerRecord::toMap).toList());
            m.put("pools", s.pools().stream().map(LedgerRecord::toMap).toList());
            s.issued().ifPresent(v -> m.put("issued", v));
        }
        return m;
    }

    /** @return the certificate of an allocation record; unrated when absent or not understood (older writers) */
    private static PlacementQuality placement(JsonNode p) {
        if (p.path("optimal").asBoolean(false)) {
            return PlacementQuality.optimal();
        }
        double w = p.path("within").asDouble(-1);
        return w >= 0 && w <= 100 ? PlacementQuality.within(w) : PlacementQuality.unrated();
    }

    private static LedgerRecord fromNode(JsonNode n) {
        String op = n.path("op").asText();
        return switch (op) {
            case "A" -> {
                List<String> uuids = new ArrayList<>();
                n.path("devices").forEach(x -> uuids.add(x.asText()));
                String id = text(n, "id");
                if (uuids.isEmpty()) {
                    throw new IllegalArgumentException("allocation record " + id + " has no devices");
                }
                yield new Allocated(id, uuids, request(n.path("request")), Instant.parse(text(n, "createdAt")),
                        n.hasNonNull("expiresAt") ? Optional.of(Instant.parse(n.get("expiresAt").asText()))
                                : Optional.empty(),
                        placement(n.path("placement")), "release".equals(n.path("expiry").asText()));
            }
            case "J" -> new JobCgroup(text(n, "id"), text(n, "cgroup"));
            case "JP" -> new JobProcess(text(n, "id"), new HolderProcess(n.path("process").path(0).asLong(),
                    n.path("process").path(1).asLong()));
            case "R" -> {
                List<String> drain = new ArrayList<>();
                n.path("drain").forEach(x -> drain.add(x.asText()));
                Optional<HolderProcess> h = n.has("holder")
                        ? Optional.of(new HolderProcess(n.get("holder").get(0).asLong(),
                                n.get("holder").get(1).asLong()))
                        : Optional.empty();
                yield new Released(text(n, "id"), Cause.valueOf(text(n, "cause")), Instant.parse(text(n, "at")),
                        drain, h);
            }
            case "N" -> new Renewed(text(n, "id"), Instant.parse(text(n, "expiresAt")));
            case "P" -> new PoolChanged(text(n, "device"), Pool.valueOf(text(n, "pool")),
                    n.hasNonNull("reason") ? Optional.of(n.get("reason").asText()) : Optional.empty(),
                    n.hasNonNull("since") ? Optional.of(Instant.parse(n.get("since").asText())) : Optional.empty());
            case "S" -> {
                List<Allocated> live = new ArrayList<>();
                n.path("live").forEach(x -> live.add((Allocated) fromNode(x)));
                List<PoolChanged> pools = new ArrayList<>();
                n.path("pools").forEach(x -> pools.add((PoolChanged) fromNode(x)));
                yield new Snapshot(live, pools, n.hasNonNull("issued") && n.get("issued").isTextual()
                        ? Optional.of(n.get("issued").asText()) : Optional.empty());
            }
            default -> throw new IllegalArgumentException("unknown record type \"" + op + "\"");
        };
    }

    private static String text(JsonNode n, String field) {
        JsonNode v = n.get(field);
        if (v == null || !v.isTextual() || v.asText().isEmpty()) {
            throw new IllegalArgumentException("record without \"" + field + "\"");
        }
        return v.asText();
    }

    private static Map<String, Object> request(GpuRequest r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("count", r.count());
        r.minMemory().ifPresent(x -> m.put("minMemoryBytes", x.bytes()));
        r.minComputeCapability().ifPresent(x -> m.put("minComputeCapability", x.toString()));
        r.vendor().ifPresent(x -> m.put("vendor", x.name()));
        r.modelPattern().ifPresent(x -> m.put("model", x));
        if (!r.deviceIndices().isEmpty()) {
            m.put("indices", r.deviceIndices());
        }
        if (!r.deviceUuids().isEmpty()) {
            m.put("uuids", r.deviceUuids());
        }
        if (!r.requiredDevices().isEmpty()) {
            m.put("required", r.requiredDevices());
        }
        r.sharedMemory().ifPresent(x -> m.put("sharedBytes", x.bytes()));
        r.owner().ifPresent(x -> m.put("owner", x));
        r.jobId().ifPresent(x -> m.put("job", x));
        if (!r.labels().isEmpty()) {
            m.put("labels", new TreeMap<>(r.labels()));
        }
        r.hint().ifPresent(x -> m.put("hint", x.name()));
        r.preferredNuma().ifPresent(x -> m.put("numa", x));
        r.maxDuration().ifPresent(x -> m.put("maxDurationNanos", x.toNanos()));
        r.holder().ifPresent(h -> m.put("holder", List.of(h.pid(), h.startTime())));
        r.ownerUid().ifPresent(x -> m.put("uid", x));
        r.jobCgroup().ifPresent(x -> m.put("cgroup", x));
        r.jobProcess().ifPresent(h -> m.put("jobProcess", List.of(h.pid(), h.startTime())));
        return m;
    }

    private static GpuRequest request(JsonNode r) {
        // as recorded: a ledger written before the bounds on owners, job ids and labels still opens
        GpuRequest.Builder b = GpuRequest.builder().recorded().count(r.path("count").asInt(1));
        if (r.has("minMemoryBytes")) {
            b.minMemory(MemorySize.ofBytes(r.get("minMemoryBytes").asLong()));
        }
        if (r.has("minComputeCapability")) {
            b.minComputeCapability(ComputeCapability.parse(r.get("minComputeCapability").asText()));
        }
        if (r.has("vendor")) {
            b.vendor(GpuVendor.parse(r.get("vendor").asText()));
        }
        if (r.has("model")) {
            b.modelPattern(r.get("model").asText());
        }
        if (r.has("indices")) {
            List<Integer> idx = new ArrayList<>();
            r.get("indices").forEach(x -> idx.add(x.asInt()));
            b.deviceIndices(idx);
        }
        if (r.has("uuids")) {
            List<String> u = new ArrayList<>();
            r.get("uuids").forEach(x -> u.add(x.asText()));
            b.deviceUuids(u);
        }
        if (r.has("required")) {
            List<Integer> idx = new ArrayList<>();
            r.get("required").forEach(x -> idx.add(x.asInt()));
            b.requiredDevices(idx);
        }
        if (r.has("sharedBytes")) {
            b.sharedAsRecorded(MemorySize.ofBytes(r.get("sharedBytes").asLong()));
        }
        if (r.has("owner")) {
            b.owner(r.get("owner").asText());
        }
        if (r.has("job")) {
            b.jobId(r.get("job").asText());
        }
        if (r.has("labels")) {
            r.get("labels").fields().forEachRemaining(e -> b.label(e.getKey(), e.getValue().asText()));
        }
        if (r.has("hint")) {
            b.hint(WorkloadHint.valueOf(r.get("hint").asText()));
        }
        if (r.has("numa")) {
            b.preferredNuma(r.get("numa").asInt());
        }
        if (r.has("maxDurationNanos")) {
            b.maxDuration(Duration.ofNanos(r.get("maxDurationNanos").asLong()));
        }
        if (r.has("holder")) {
            b.holder(new HolderProcess(r.get("holder").get(0).asLong(), r.get("holder").get(1).asLong()));
        }
        if (r.has("uid")) {
            b.ownerUid(r.get("uid").asLong());
        }
        if (r.has("cgroup")) {
            b.jobCgroup(r.get("cgroup").asText());
        }
        if (r.has("jobProcess")) {
            b.jobProcess(new HolderProcess(r.get("jobProcess").path(0).asLong(), r.get("jobProcess").path(1).asLong()));
        }
        return b.build();
    }
}
