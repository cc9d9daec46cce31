package io.gpusched.core;

import io.gpusched.core.host.JobCgroupException;
import io.gpusched.core.host.JobCgroups;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reclaim rule for allocations with a job cgroup ({@link GpuRequest#jobCgroup()}, or a job process run without one:
 * {@link GpuRequest#jobProcess()}): before an allocation that must
 * end (its holder is gone, or its lease ends it) is released, its job's processes are ended and its cgroup removed
 * ({@link JobCgroups#end}), under the node's lock, so that no GPU is handed out while a job still uses it. When that
 * fails (not permitted, processes that do not die) the allocation stays held: the failure is logged, audited
 * ({@link AllocationEvent.Type#RECLAIM_BLOCKED}) and shown in {@link GpuScheduler#status()}'s notes, and tried again
 * after {@link #retry} (meanwhile only a cheap look whether the cgroup is gone), so a stuck job does not slow every
 * transaction of the node.
 */
final class JobCgroupReclaim {
    private static final Logger LOG = LoggerFactory.getLogger(JobCgroupReclaim.class);
    /** How long one attempt waits for a job's processes to die (the node's lock is held meanwhile); tests shorten. */
    static volatile Duration timeout = Duration.ofSeconds(2);
    /** How long after a failed attempt the next one is made; tests shorten it. */
    static volatile Duration retry = Duration.ofSeconds(10);

    private record Stuck(String message, long retryAtNanos) {
    }

    private final Map<String, Stuck> stuck = new ConcurrentHashMap<>();
    private final BooleanSupplier recordsOurOwn;

    /**
     * @param recordsOurOwn whether only this process's user can have written the ledger's records (no state group, a
     *                      ledger file of its own): a recorded job process is SIGKILLed only then, and only when it is
     *                      this user's own process; else a record could make this process (root's, say) kill any
     *                      process a member of the state group names
     */
    JobCgroupReclaim(BooleanSupplier recordsOurOwn) {
        this.recordsOurOwn = recordsOurOwn;
    }

    /**
     * @param a      an allocation that must end
     * @param why    why ("its holder pid 42 is gone", "its lease ended at ...")
     * @param now    for the audit event
     * @param events receives a {@code RECLAIM_BLOCKED} event when an attempt fails
     * @return true when it may be released now: no job cgroup, the cgroup is gone, or its job was ended now
     */
    boolean ended(Allocation a, String why, Instant now, List<AllocationEvent> events) {
        Optional<String> recorded = a.request().jobCgroup();
        if (recorded.isEmpty()) {
            Optional<HolderProcess> job = a.request().jobProcess();
            return job.isEmpty() || endedJobProcess(a, job.get(), why, now, events);
        }
        Path dir = Path.of(recorded.get());
        Stuck s = stuck.get(a.id());
        if (s != null && System.nanoTime() - s.retryAtNanos() < 0) {
            if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
                stuck.remove(a.id());
                return true;
            }
            return false;
        }
        try {
            JobCgroups.end(dir, a.id(), timeout);
            stuck.remove(a.id());
            return true;
        } catch (JobCgroupException e) {
            String msg = "allocation " + a.id() + " is kept held: " + why + ", but its job cgroup could not be ended: "
                    + e.getMessage();
            stuck.put(a.id(), new Stuck(msg, System.nanoTime() + retry.toNanos()));
            LOG.warn(msg);
            events.add(new AllocationEvent(AllocationEvent.Type.RECLAIM_BLOCKED, now, Optional.of(a.id()), a.owner(),
                    a.request().jobId(), a.deviceUuids(), Optional.empty(), msg));
            return false;
        }
    }

    /**
     * The rule for a job run without a cgroup ({@link GpuRequest#jobProcess()}): its recorded process (pid and start
     * time, so a reused pid is never signalled) gets SIGKILL and is waited for; what it forked is not tracked (README:
     * jobs that start other processes want a fence).
     *
     * @return true when the recorded process is gone (or was ended now)
     */
    private boolean endedJobProcess(Allocation a, HolderProcess job, String why, Instant now,
            List<AllocationEvent> events) {
        Stuck s = stuck.get(a.id());
        if (s != null && System.nanoTime() - s.retryAtNanos() < 0) {
            if (job.isGoneFor(a.owner(), a.request().ownerUid())) {
                stuck.remove(a.id());
                return true;
            }
            return false;
        }
        if (job.isGoneFor(a.owner(), a.request().ownerUid())) {
            stuck.remove(a.id());
            return true;
        }
        String untrusted = untrusted(job);
        if (untrusted != null) {
            return blocked(a, "allocation " + a.id() + " is kept held while its job runs: " + why + ", but its job"
                    + " (pid " + job.pid() + ", run without a cgroup) is left running, as " + untrusted
                    + "; its GPUs are released once it ends (its owner or root may end it)", now, events);
        }
        Optional<ProcessHandle> handle = ProcessHandle.of(job.pid());
        boolean signalled = handle.isPresent() && job.isAlive() && handle.get().destroyForcibly();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (signalled && job.isAlive() && System.nanoTime() - deadline < 0) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (!job.isAlive()) {
            stuck.remove(a.id());
            return true;
        }
        return blocked(a, "allocation " + a.id() + " is kept held: " + why + ", but its job (pid " + job.pid()
                + ", run without a cgroup) could not be ended: " + (signalled ? "it did not die within "
                        + timeout.toMillis() + " ms of SIGKILL"
                        : "SIGKILL was not permitted (its owner or root may end"
                                + " it)"),
                now, events);
    }

    private boolean blocked(Allocation a, String msg, Instant now, List<AllocationEvent> events) {
        stuck.put(a.id(), new Stuck(msg, System.nanoTime() + retry.toNanos()));
        LOG.warn(msg);
        events.add(new AllocationEvent(AllocationEvent.Type.RECLAIM_BLOCKED, now, Optional.of(a.id()), a.owner(),
                a.request().jobId(), a.deviceUuids(), Optional.empty(), msg));
        return false;
    }

    /**
     * @return null when this process may end the recorded job process (only its own user could have written the
     *     record, and the process is its user's), else why not
     */
    private String untrusted(HolderProcess job) {
        if (!recordsOurOwn.getAsBoolean()) {
            return "the node ledger is shared (a state group, or another user's file), so a record there does not"
                    + " name a process this one may kill";
        }
        try {
            Object uid = Files.getAttribute(Path.of("/proc", Long.toString(job.pid())), "unix:uid",
                    LinkOption.NOFOLLOW_LINKS);
            Object me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            return uid.equals(me) ? null
                    : "it is uid " + uid + "'s process, not this process's user's (uid " + me + ")";
        } catch (IOException | UnsupportedOperationException e) {
            return "its owner cannot be read (" + e.getMessage() + ")";
        }
    }

    /** @return whether an attempt for this allocation failed and the next is not due yet */
    boolean waiting(String id) {
        Stuck s = stuck.get(id);
        return s != null && System.nanoTime() - s.retryAtNanos() < 0;
    }

    /**
     * @param live the ids of the live allocations (the others are forgotten)
     * @return one sentence per live allocation kept held because its job could not be ended
     */
    List<String> notes(Collection<String> live) {
        stuck.keySet().retainAll(live);
        List<String> out = new ArrayList<>();
        for (Stuck s : stuck.values()) {
            out.add(s.message());
        }
        return out;
    }
}
