package io.gpusched.service;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.LaunchedJob;
import io.gpusched.server.Caller;
import java.nio.file.Path;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/** One job of the service, from its request to its end; its fields are written by its driver and read by views. */
final class Job {
    /** Where a job stands. */
    enum State {
        QUEUED, RUNNING, EXITED, KILLED, FAILED, CANCELLED
    }

    final String id;
    final Caller owner;
    final Requests.Job request;
    final Instant createdAt;
    final Optional<Path> output;
    /** Why its output file was deleted while its record is kept (the user's output budget), or null. */
    volatile String outputDropped;
    volatile State state = State.QUEUED;
    volatile Allocation allocation;
    volatile LaunchedJob launched;
    volatile FairQueue.Ticket ticket;
    volatile Instant startedAt;
    volatile Instant endedAt;
    volatile Integer exitCode;
    volatile String signal;
    volatile String failure;
    /** Set by a cancel (or a client that went away): the driver ends the job as CANCELLED. */
    volatile String cancelled;
    /** Set with {@link #cancelled} by a cancel of its owner or an admin (not a client gone, not a stop). */
    volatile boolean cancelledBy;
    /** Set when it was dropped from the queue because its client went (or half-closed). */
    volatile boolean clientWent;
    final CompletableFuture<Void> ended = new CompletableFuture<>();
    /** Completed once a launched job's cgroup is emptied and removed and its allocation released (or kept held). */
    final CompletableFuture<Void> settled = new CompletableFuture<>();
    /**
     * A detached job's: completed once its output file is final (its relays done, what was lost noted, the file
     * closed), which comes after {@link #ended}: the state turns when the job's processes end, the output a moment
     * later (at most {@link Jobs#RELAY_WAIT} and a let-go, for a pipe a process outside the job holds).
     */
    final CompletableFuture<Void> outputFinal = new CompletableFuture<>();

    Job(String id, Caller owner, Requests.Job request, Instant createdAt, Optional<Path> output) {
        this.id = id;
        this.owner = owner;
        this.request = request;
        this.createdAt = createdAt;
        this.output = output;
    }

    /** @return the job's cgroup ({@code <parent>/job-<allocation id>}), or null before it was launched */
    Path cgroup() {
        LaunchedJob l = launched;
        return l == null ? null : l.cgroup();
    }

    boolean over() {
        return state != State.QUEUED && state != State.RUNNING;
    }

    /**
     * @param viewer who asks: its argv, env, cwd and output are shown only to its owner and admins
     * @return the job view of docs/SERVICE.md
     */
    Map<String, Object> view(Caller viewer) {
        boolean full = viewer.admin() || (viewer.identified() && viewer.uid() == owner.uid());
        Allocation a = allocation;
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("id", id);
        v.put("owner", owner.user());
        v.put("uid", owner.uid());
        v.put("state", state.name());
        v.put("allocationId", a == null ? null : a.id());
        v.put("devices", a == null ? List.of() : a.deviceIndices());
        v.put("createdAt", createdAt.toString());
        v.put("startedAt", startedAt == null ? null : startedAt.toString());
        v.put("endedAt", endedAt == null ? null : endedAt.toString());
        v.put("exitCode", exitCode);
        v.put("signal", signal);
        v.put("detached", request.detach());
        v.put("cgroup", launched == null ? null : launched.cgroup().toString());
        v.put("argv", full ? request.argv() : null);
        v.put("cwd", full ? request.cwd() : null);
        v.put("output", full ? output.map(Path::toString).orElse(null) : null);
        v.put("failure", full ? failure : null);
        return v;
    }
}
