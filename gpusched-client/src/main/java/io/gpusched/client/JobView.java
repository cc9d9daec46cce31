package io.gpusched.client;

import java.util.List;
import java.util.Objects;

/**
 * A job of the node service ({@code GET /api/v1/jobs}). A job's {@code argv}, {@code cwd} and {@code output} are shown
 * only to its owner and admins (null for others).
 *
 * @param id           the job's id
 * @param owner        whose it is (a user name)
 * @param uid          the owner's uid
 * @param state        {@code QUEUED}, {@code RUNNING}, {@code EXITED}, {@code KILLED}, {@code FAILED} or
 *                     {@code CANCELLED}
 * @param allocationId its allocation, or null before it has one
 * @param devices      its GPUs' indices
 * @param createdAt    when it was asked for
 * @param startedAt    when it started, or null
 * @param endedAt      when it ended, or null
 * @param exitCode     its exit code, or null while it runs
 * @param signal       the signal that ended it ({@code KILL}, ...), or null
 * @param detached     whether it runs without a client attached
 * @param cgroup       its cgroup, or null
 * @param argv         its command, or null when not shown to the caller
 * @param cwd          its working directory, or null when not shown
 * @param output       the file its output goes to (detached jobs), or null
 */
public record JobView(String id, String owner, Long uid, String state, String allocationId, List<Integer> devices,
        String createdAt, String startedAt, String endedAt, Integer exitCode, String signal, boolean detached,
        String cgroup, List<String> argv, String cwd, String output) {

    /** Copies the lists. */
    public JobView {
        Objects.requireNonNull(id, "id");
        Objects.requireNonNull(owner, "owner");
        Objects.requireNonNull(state, "state");
        devices = List.copyOf(devices);
        argv = argv == null ? null : List.copyOf(argv);
    }

    /** @return whether the job has ended (exited, was killed, failed or was cancelled) */
    public boolean ended() {
        return !state.equals("QUEUED") && !state.equals("RUNNING");
    }
}
