package io.gpusched.service;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationEvent;
import io.gpusched.core.AllocationListener;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuAllocationException.Reason;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.host.StateDirectory;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaSearch;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.IsolationException;
import io.gpusched.isolation.JobLauncher;
import io.gpusched.server.Caller;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node service: what a shared node's users ask of its one ledger, each request decided for its caller (the
 * kernel's peer credentials, {@link Caller}). Owners act on their own allocations and jobs, admins ({@code root} and
 * {@code gpu.service.admin_group}) on any, and drain GPUs; quotas ({@code gpu.users}) hold in the ledger's
 * transaction; waiting requests are served fairly across users ({@link FairQueue}); jobs run as their caller, fenced
 * ({@link Jobs}); logins are fenced off the GPUs ({@link LoginFences}); every change and every refusal is audited
 * ({@link AuditLog}). {@link ServiceRoutes} puts it on the console's routes.
 *
 * <p>{@link #start()} ends what a killed predecessor left (job cgroups and their allocations) and puts the login
 * fences on; {@link #close()} cancels every job and waiting request and takes the login fences off.
 */
public final class NodeService implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(NodeService.class);

    private final GpuScheduler scheduler;
    private final GpuConfig config;
    private final Clock clock;
    private final Access access;
    private final AuditLog audit;
    private final StopGate stopGate = new StopGate();
    /** Serializes {@link #start} and {@link #stop}; guards {@link #stopBegun} and {@link #stopped}. */
    private final Object stopLock = new Object();
    /** Set as the stop begins (a stop that failed part-way is not run again; close still closes the audit). */
    private boolean stopBegun;
    private boolean stopped;
    private final FairQueue queue;
    private final Jobs jobs;
    private final LoginFences logins;
    private final UserDirectory nss;
    private final JobLauncher launcher;
    private final AllocationListener wake;
    private volatile List<String> recovered = List.of();
    private final Path outputDir;
    private final Path stateDir;
    /** Held from {@link #start()} to {@link #close()}: one service per state directory. */
    private InstanceLock instance;
    /**
     * The allocations this service granted that are not known to have ended, by id: {@link #release} checks the
     * caller against one of them without catching up with the node ledger (a transaction behind the force in flight).
     * Only what never changes for an id is read from them (its owner and owner uid: ids are never reused), so the
     * check is as exact as on a fresh read; whether it is still live is decided by the release itself. An id not here
     * is read from the ledger, as before. Entries leave on the allocation's end (its event or its release here).
     */
    private final Map<String, Allocation> granted = new ConcurrentHashMap<>();
    /** Most entries {@link #granted} keeps; past it, it is emptied (ids then come from the ledger again). */
    static final int MAX_GRANTED = 65_536;

    private NodeService(Builder b) {
        this.scheduler = b.scheduler;
        this.config = b.config;
        this.clock = b.clock;
        this.nss = b.users;
        this.access = new Access(config.service().adminGroup());
        Path state = b.stateDir;
        this.audit = new AuditLog(state.resolve("audit.log"), clock, true);
        this.queue = new FairQueue(scheduler, clock, t -> audit.record(t.caller, "allocate.dropped", null,
                t.request.describe(), "DROPPED", "left the queue without GPUs"), (t, d) -> {
                    refused(t.caller, "allocate", null, t.request.describe(), d);
                    d.audited = true; // its caller, waking after the audit closed, records it no more
                });
        this.launcher = b.launcher;
        try {
            Path out;
            try {
                out = OutputFile.directory(state);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot prepare the job output directory: " + e.getMessage(), e);
            }
            CudaEnvironmentResolver cuda = CudaEnvironmentResolver.builder().search(CudaSearch.host(config.cudaPaths()))
                    .build();
            this.outputDir = out;
            this.stateDir = state;
            this.jobs = new Jobs(scheduler, launcher, b.jobsUnavailable, cuda, queue, audit, access, out,
                    config.service().killGrace(), b.heartbeat, clock);
            CgroupDeviceIsolator iso = b.isolator != null ? b.isolator : launcher != null ? launcher.isolator() : null;
            List<Path> fenced = config.service().loginCgroups();
            if (!fenced.isEmpty() && iso == null) {
                throw new IsolationException("gpu.service.login_cgroups is set but no cgroup isolator is available: "
                        + b.jobsUnavailable);
            }
            this.logins = new LoginFences(iso, fenced, state.resolve("login-fences"));
            if (launcher != null) {
                logins.checkJobParent(launcher.cgroupParent());
            }
        } catch (RuntimeException e) {
            queue.close(); // a refused build leaves no dispatcher thread behind: nobody holds it to close it
            audit.close();
            throw e;
        }
        this.wake = e -> {
            if (e.type() == AllocationEvent.Type.RELEASED || e.type() == AllocationEvent.Type.RECLAIMED) {
                e.allocationId().ifPresent(granted::remove);
            }
            if (e.type() == AllocationEvent.Type.RELEASED && e.allocationId().filter(queue::releasedHere)
                    .isPresent()) {
                return; // the queue made this release and granted on the state it left
            }
            if (e.type() != AllocationEvent.Type.ALLOCATED && e.type() != AllocationEvent.Type.REJECTED
                    && e.type() != AllocationEvent.Type.RENEWED) {
                queue.wake();
            }
        };
        scheduler.addListener(wake);
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Takes the state directory's service lock (one service per state directory), deletes the output files of the
     * previous run's detached jobs (their records died with it), ends what a killed predecessor left (its job
     * cgroups, their allocations) and puts the login fences on.
     *
     * @return this
     * @throws GpuException when another service runs on this state directory (nothing was ended)
     * @throws IsolationException when a login cgroup cannot be fenced, or the kernel does not apply the fence
     * @throws IllegalStateException once started, or once {@link #stop}ped (a stopped service does not start again)
     */
    public NodeService start() {
        synchronized (stopLock) { // a stop waits for a start under way, and nothing starts once it came
            if (stopped || stopBegun) {
                throw new IllegalStateException("the node service was stopped: it does not start again (make a new"
                        + " one)");
            }
            return startOnce();
        }
    }

    private synchronized NodeService startOnce() {
        if (instance != null) {
            throw new IllegalStateException("the node service was already started");
        }
        instance = InstanceLock.acquire(outputDir, stateDir);
        try {
            int forgotten = OutputFile.forgetPreviousRun(outputDir);
            if (forgotten > 0) {
                LOG.info("deleted {} job output files of the service's previous run in {} (their jobs' records ended"
                        + " with it)", forgotten, outputDir);
            }
        } catch (IOException e) {
            LOG.warn("the previous run's job output files in {} could not all be deleted: {}", outputDir, e.toString());
        }
        recovered = jobs.endLeftovers();
        for (String r : recovered) {
            LOG.info("on start: {}", r);
        }
        logins.start();
        return this;
    }

    /**
     * Drops the state directory's service lock as the kernel does when the service's process is killed (tests that
     * leave a service running in their JVM "killed", to start its successor beside it).
     */
    synchronized void dropInstanceLockAsIfKilled() {
        if (instance != null) {
            instance.close();
        }
    }

    /** @return what {@link #start()} ended of a previous run */
    public List<String> recovered() {
        return recovered;
    }

    /** @return the login cgroups fenced while the service runs (empty: off) */
    public List<Path> loginCgroups() {
        return logins.cgroups();
    }

    /** @return whether jobs can run here, or why not */
    public Optional<String> jobsUnavailable() {
        return launcher == null ? Optional.of(jobsUnavailableReason) : Optional.empty();
    }

    private String jobsUnavailableReason = "";

    /** @return the scheduler the service decides on */
    public GpuScheduler scheduler() {
        return scheduler;
    }

    Jobs jobs() {
        return jobs;
    }

    FairQueue queue() {
        return queue;
    }

    AuditLog audit() {
        return audit;
    }

    Clock clock() {
        return clock;
    }

    /** Remembers a caller's groups (for per-group quotas). */
    void seen(Caller c) {
        if (c.identified()) {
            nss.remember(c.user(), c.uid(), c.groups());
        }
    }

    /** @return the groups of a user, for per-group quotas: the caller's own where seen, else NSS */
    List<String> groupsOf(String user) {
        return nss.groupsOf(user);
    }

    // ------------------------------------------------------------------------------------------------ allocations

    /**
     * Allocates for the caller: the owner is the caller (an admin may name another user of the node).
     *
     * @param wait how long to queue (fairly) for busy GPUs; empty: refuse at once
     * @param gone answers true once the client has gone (a waiting request is then dropped)
     * @throws AccessDeniedException when a caller who is not an admin names another owner
     * @throws GpuAllocationException the refusal (with its reason)
     * @throws IllegalArgumentException for a request the caller may not make (a holder process)
     */
    public Allocation allocate(Caller c, GpuRequest request, Optional<Duration> wait, BooleanSupplier gone)
            throws InterruptedException {
        seen(c);
        String what = request.describe();
        if (!stopGate.tryEnter()) {
            FairQueue.Dropped d = new FairQueue.Dropped("the node service is stopping; nothing was allocated");
            refused(c, "allocate", null, what, d);
            throw d;
        }
        try {
            return allocateEntered(c, request, wait, gone, what);
        } finally {
            stopGate.exit(); // after its audit line: the stop waits for it, and the audit closes after the stop
        }
    }

    private Allocation allocateEntered(Caller c, GpuRequest request, Optional<Duration> wait, BooleanSupplier gone,
            String what) throws InterruptedException {
        try {
            access.checkIdentified(c, "allocate");
            access.checkOwner(c, request.owner());
            if (request.holder().isPresent() || request.jobCgroup().isPresent() || request.jobProcess().isPresent()
                    || request.ownerUid().isPresent()) {
                throw new IllegalArgumentException("a request to the node service may not name a holder process, a job"
                        + " cgroup, a job process or an owner uid: the service sets them");
            }
            GpuRequest owned = ownedBy(c, request);
            Allocation a;
            if (wait.isEmpty()) {
                a = queue.now(c, owned); // in its fair place: nothing owed to a waiting request is taken
            } else {
                FairQueue.Ticket t = queue.enqueue(c, owned, wait.get(), gone);
                try {
                    a = t.result.get();
                } catch (InterruptedException e) {
                    queue.cancel(t, "its caller was interrupted");
                    throw e;
                } catch (ExecutionException e) {
                    throw e.getCause() instanceof RuntimeException re ? re : new GpuException(e.getMessage());
                }
            }
            if (granted.size() >= MAX_GRANTED) {
                granted.clear();
            }
            granted.put(a.id(), a);
            audit.record(c, "allocate", a.id(), what, "ok", "GPUs " + a.deviceIndices() + " for " + a.owner()
                    .orElse("?"));
            return a;
        } catch (RuntimeException e) {
            if (!(e instanceof FairQueue.Dropped d && d.audited)) {
                refused(c, "allocate", null, what, e);
            }
            throw e;
        }
    }

    private GpuRequest ownedBy(Caller c, GpuRequest request) {
        Optional<String> named = request.owner();
        if (named.isEmpty() || named.get().equals(c.user())) {
            return request.withOwner(c.user(), c.uid());
        }
        OptionalLong uid = nss.uidOf(named.get());
        if (uid.isEmpty()) {
            throw new IllegalArgumentException("owner \"" + Requests.printable(named.get()) + "\" is not a user of this"
                    + " node (NSS does not know the name; an owner is a user name, not a uid)");
        }
        return request.withOwner(named.get(), uid.getAsLong());
    }

    /**
     * Releases an allocation of the caller's (or any, for an admin). An allocation a running job of the service holds
     * is released by cancelling its job.
     *
     * @return whether it was live and is now released
     */
    public boolean release(Caller c, String id) throws InterruptedException {
        stopGate.enter(c, "release", id);
        try {
            try {
                Allocation known = granted.get(id);
                Optional<Allocation> a = known != null ? Optional.of(known) : scheduler.allocation(id);
                if (a.isEmpty()) {
                    access.checkIdentified(c, "release");
                    boolean r = scheduler.release(id); // false for one released before; UNKNOWN_ALLOCATION otherwise
                    audit.record(c, "release", id, null, "ok", "was not live");
                    return r;
                }
                access.check(c, "release", a.get());
                Optional<Job> job =
                        jobs.all().stream().filter(j -> !j.over() && j.allocation != null && j.allocation.id()
                                .equals(id)).findFirst();
                if (job.isPresent()) {
                    jobs.cancel(c, job.get().id);
                    audit.record(c, "release", id, null, "ok", "its job " + job.get().id + " was cancelled");
                    return true;
                }
                boolean r = queue.release(id); // while requests wait: with their grants, in one transaction
                granted.remove(id);
                audit.record(c, "release", id, null, "ok", r ? "released" : "was not live");
                return r;
            } catch (RuntimeException e) {
                refused(c, "release", id, null, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    /** Extends the lease of an allocation of the caller's (or any, for an admin). */
    public Allocation renew(Caller c, String id, Duration lease) {
        stopGate.enter(c, "renew", id);
        try {
            try {
                Allocation a = scheduler.allocation(id).orElseThrow(() -> new GpuAllocationException(
                        Reason.UNKNOWN_ALLOCATION, "no live allocation \"" + Requests.printable(id) + "\" to renew"));
                access.check(c, "renew", a);
                Allocation r = scheduler.renew(id, lease);
                audit.record(c, "renew", id, "lease " + lease, "ok", "until " + r.expiresAt().map(Object::toString)
                        .orElse("?"));
                return r;
            } catch (RuntimeException e) {
                refused(c, "renew", id, "lease " + lease, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    /** Drains a GPU (admins only). @return whether it was in service */
    public boolean drain(Caller c, int index, String reason) {
        stopGate.enter(c, "drain", "GPU " + index);
        try {
            try {
                access.checkAdmin(c, "drain", "GPU " + index);
                String why = "drained by " + c.user() + (reason.isBlank() ? "" : ": " + reason);
                boolean r = scheduler.drain(index, why);
                audit.record(c, "drain", "GPU " + index, reason, "ok", r ? "drained" : "was drained already");
                queue.wake();
                return r;
            } catch (RuntimeException e) {
                refused(c, "drain", "GPU " + index, reason, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    /** Puts a drained GPU back in service (admins only). @return whether it was drained */
    public boolean undrain(Caller c, int index) {
        stopGate.enter(c, "undrain", "GPU " + index);
        try {
            try {
                access.checkAdmin(c, "undrain", "GPU " + index);
                boolean r = scheduler.undrain(index);
                audit.record(c, "undrain", "GPU " + index, null, "ok", r ? "back in service" : "was not drained");
                queue.wake();
                return r;
            } catch (RuntimeException e) {
                refused(c, "undrain", "GPU " + index, null, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    // ------------------------------------------------------------------------------------------------ jobs

    /** Checks and registers a job for its caller (see {@link Jobs#prepare}); refusals are audited. */
    Job prepareJob(Caller c, Requests.Job r) {
        seen(c);
        try {
            Job j = jobs.prepare(c, r);
            audit.record(c, "job.submit", j.id, String.join(" ", r.argv()), "ok", r.detach() ? "detached"
                    : "attached");
            return j;
        } catch (RuntimeException e) {
            refused(c, "job.submit", null, String.join(" ", r.argv()), e);
            throw e;
        }
    }

    /** Cancels a job of the caller's (or any, for an admin). */
    Job cancelJob(Caller c, String id) throws InterruptedException {
        stopGate.enter(c, "job.cancel", id);
        try {
            try {
                Job j = jobs.cancel(c, id);
                audit.record(c, "job.cancel", id, null, "ok", j.state.name());
                return j;
            } catch (RuntimeException e) {
                refused(c, "job.cancel", id, null, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    /** Passes a signal to a job of the caller's (or any, for an admin). */
    int signalJob(Caller c, String id, String signal) {
        stopGate.enter(c, "job.signal", id);
        try {
            try {
                int n = jobs.signal(c, id, signal);
                audit.record(c, "job.signal", id, signal, "ok", n + " process(es)");
                return n;
            } catch (RuntimeException e) {
                refused(c, "job.signal", id, signal, e);
                throw e;
            }
        } finally {
            stopGate.exit();
        }
    }

    /** Refuses (and audits) reading a job's logs by a caller who may not. */
    void checkLogs(Caller c, String id) throws InterruptedException {
        Job j = jobs.get(id);
        try {
            access.checkJob(c, "read the logs of", id, j.owner.user(), j.owner.uid());
            if (j.over() && j.output.isPresent()) {
                // its output becomes final a moment after it ended, and the output budget applied then may delete it:
                // the answer says so, not a 200 with nothing (review49)
                Jobs.awaitOutputFinal(j);
            }
            if (j.output.isEmpty()) {
                throw new IllegalStateException("job " + id + " is attached: its output went to its client; only"
                        + " detached jobs (run --detach) keep an output file");
            }
            if (j.outputDropped != null) {
                throw new IllegalStateException("job " + id + ": " + j.outputDropped);
            }
        } catch (RuntimeException e) {
            refused(c, "job.logs", id, null, e);
            throw e;
        }
    }

    /** @return every job the service keeps, as {@code viewer} may see them (docs/SERVICE.md, job view) */
    public List<Map<String, Object>> jobViews(Caller viewer) {
        return jobs.all().stream().map(j -> j.view(viewer)).toList();
    }

    /** @return the waiting requests, in the order they would be served */
    public List<Map<String, Object>> queueView() {
        return queue.views().stream().map(ServiceViews::queueEntry).toList();
    }

    void refused(Caller c, String action, String subject, String request, RuntimeException e) {
        // the reason its answer names (SHUTTING_DOWN, UNKNOWN_JOB, ...): one mapping for the answer and the audit
        Object reason = ServiceExchanges.error(e).get("reason");
        audit.record(c, action, subject, request, reason != null ? reason.toString() : e.getClass().getSimpleName(),
                e.getMessage());
    }

    /**
     * Stops serving: refuses every change from now on (503 {@code SHUTTING_DOWN}, audited), cancels every job (TERM,
     * then KILL after the grace period) and every waiting request, and takes the login fences off; returns once the
     * changes under way when it came have ended. The audit stays open, so that what the console still answers while
     * it lets answers finish (its close grace) is audited too: {@link #close} it after the console. Idempotent.
     */
    public void stop() {
        synchronized (stopLock) {
            if (stopped || stopBegun) {
                return;
            }
            stopBegun = true;
            stopGate.close();
            scheduler.removeListener(wake);
            // the queue first: nothing is granted once the stop came (a job's kill grace can take seconds), and a job
            // being submitted meanwhile is refused its GPUs rather than started behind the jobs' close
            queue.close();
            jobs.close();
            logins.close();
            if (launcher != null) {
                launcher.close();
            }
            stopGate.awaitChanges(); // those under way when the stop came end before it returns, audited
            stopped = true;
        }
    }

    /**
     * {@link #stop}s, if that was not done, then closes the audit and gives up the node's one-service lock. A host
     * with a console in front closes in this order: {@link #stop}, the console, then this.
     */
    @Override
    public void close() {
        stop();
        audit.close();
        synchronized (this) {
            if (instance != null) {
                instance.close();
            }
        }
    }

    /**
     * Changes a caller asks for (allocate, release, renew, drain, undrain, cancel, signal): none is begun once the stop
     * came (the console still takes requests for a few seconds while it lets answers finish; their refusals are
     * audited, as the audit closes after the console), and the stop waits for those under way, their audit lines
     * written (an allocation waiting in the queue ends as the stop drops it).
     */
    private final class StopGate {
        private int underWay;
        private boolean stopping;

        /**
         * @throws FairQueue.Dropped (503 SHUTTING_DOWN) once the stop came; the refusal is audited (only logged once
         *                           {@link #close} closed the audit)
         */
        void enter(Caller c, String action, String subject) {
            if (tryEnter()) {
                return;
            }
            FairQueue.Dropped d = new FairQueue.Dropped("the node service is stopping; nothing was changed (" + action
                    + " " + Requests.printable(subject) + ")");
            refused(c, action, subject, null, d);
            throw d;
        }

        /** @return true, counted as under way, until the stop came; false once it came (the caller refuses) */
        synchronized boolean tryEnter() {
            if (stopping) {
                return false;
            }
            underWay++;
            return true;
        }

        synchronized void exit() {
            underWay--;
            notifyAll();
        }

        synchronized void close() {
            stopping = true;
        }

        /** Waits for the changes under way (they are short: a cancel waits for its job, which the stop ends first). */
        synchronized void awaitChanges() {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            boolean interrupted = false;
            while (underWay > 0 && System.nanoTime() - until < 0) {
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, Math.max(1, until - System.nanoTime()));
                } catch (InterruptedException e) {
                    interrupted = true; // still waited for: a stop returns only once nothing changes any more
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (underWay > 0) {
                LOG.warn("{} change(s) were still under way when the node service's audit closed", underWay);
            }
        }
    }

    /** Builds a {@link NodeService}. */
    public static final class Builder {
        private GpuScheduler scheduler;
        private GpuConfig config;
        private Path stateDir;
        private Clock clock = Clock.systemUTC();
        private Duration heartbeat = Jobs.HEARTBEAT;
        private JobLauncher launcher;
        private CgroupDeviceIsolator isolator;
        private String jobsUnavailable = "no job launcher was configured";
        private UserDirectory users;

        private Builder() {
        }

        /** @param v the node's scheduler (required; with the node's state directory) @return this */
        public Builder scheduler(GpuScheduler v) {
            scheduler = Objects.requireNonNull(v, "scheduler");
            return this;
        }

        /** @param v the configuration: {@code gpu.users}, {@code gpu.service} (default: defaults) @return this */
        public Builder config(GpuConfig v) {
            config = Objects.requireNonNull(v, "config");
            return this;
        }

        /**
         * @param v where the service's own files live: its lock, the audit, job output and login-fence records
         *          (default {@code gpu.service.private_dir}, else the scheduler's state directory); a directory only
         *          the service's user may change ({@link StateDirectory#requirePrivate})
         * @return this
         */
        public Builder stateDir(Path v) {
            stateDir = Objects.requireNonNull(v, "stateDir");
            return this;
        }

        /** @param v clock (tests) @return this */
        public Builder clock(Clock v) {
            clock = Objects.requireNonNull(v, "clock");
            return this;
        }

        /**
         * @param v how often an attached job's client gets a line while its job waits ({@code queued}) or runs
         *          silently (an empty line), so that a client gone is noticed and a proxy's idle timeout is not
         *          reached; default 5 s; from 100 ms to 15 s (the event stream's own heartbeat period)
         * @return this
         * @throws IllegalArgumentException outside that range
         */
        public Builder heartbeat(Duration v) {
            Objects.requireNonNull(v, "heartbeat");
            if (v.compareTo(Duration.ofMillis(100)) < 0 || v.compareTo(Duration.ofSeconds(15)) > 0) {
                throw new IllegalArgumentException("heartbeat " + v + " is outside 100ms..15s");
            }
            heartbeat = v;
            return this;
        }

        /**
         * @param v the job launcher; null: jobs are refused, saying {@code why}
         * @param why why jobs cannot run, when {@code v} is null
         * @return this
         */
        public Builder jobs(JobLauncher v, String why) {
            launcher = v;
            jobsUnavailable = v == null ? Objects.requireNonNull(why, "why") : "";
            return this;
        }

        /**
         * @param v the node's users: the same directory the scheduler resolves groups with
         *          ({@code GpuScheduler.Builder.groups}), so per-group quotas see the groups of the service's callers
         *          (default a new one)
         * @return this
         */
        public Builder users(UserDirectory v) {
            users = Objects.requireNonNull(v, "users");
            return this;
        }

        /** @param v the isolator for login fences (default the launcher's) @return this */
        public Builder isolator(CgroupDeviceIsolator v) {
            isolator = Objects.requireNonNull(v, "isolator");
            return this;
        }

        /**
         * @return the service (call {@link NodeService#start()})
         * @throws IllegalStateException without a scheduler or a state directory
         * @throws GpuException when the directory for the service's own files is one others may change (a state
         *     directory shared with a state group and no {@code gpu.service.private_dir})
         * @throws IsolationException when the job cgroup parent and a login cgroup are nested
         */
        public NodeService build() {
            if (scheduler == null) {
                throw new IllegalStateException("a NodeService needs the node's scheduler: builder().scheduler(...)");
            }
            config = config != null ? config : GpuConfig.defaults();
            if (stateDir == null) {
                Path ledger = scheduler.stateDir().orElseThrow(() -> new IllegalStateException("the node service"
                        + " needs a state directory (the node ledger's) for its audit and job output"));
                stateDir = config.service().privateDir(ledger);
            }
            stateDir = stateDir.toAbsolutePath().normalize();
            if (config.service().privateDir().isEmpty() && !writableByOwnerAlone(stateDir)) {
                throw new GpuException("the state directory " + stateDir + " is writable by group or others (shared"
                        + " with a state group?), who may rename or replace what the service keeps there (its lock,"
                        + " job output, audit, fence records): set gpu.service.private_dir to a directory only root"
                        + " writes (e.g. /var/lib/gpusched-service; docs/SERVICE.md), or chmod go-w " + stateDir);
            }
            // without private_dir the state directory holds them: it must be as private (its owner, the directories
            // above it), or another user could rename or replace them
            StateDirectory.requirePrivate(stateDir, config.service().privateDir().isPresent()
                    ? "gpu.service.private_dir" : "the state directory (which holds the service's own files without"
                            + " gpu.service.private_dir)");
            users = users != null ? users : new UserDirectory();
            NodeService s = new NodeService(this);
            s.jobsUnavailableReason = jobsUnavailable;
            return s;
        }
    }

    private static boolean writableByOwnerAlone(Path dir) {
        try {
            return !Files.exists(dir) || Files.isDirectory(dir)
                    && ((Integer) Files.getAttribute(dir, "unix:mode") & 0022) == 0;
        } catch (IOException | UnsupportedOperationException | ClassCastException e) {
            return !Files.exists(dir, LinkOption.NOFOLLOW_LINKS); // made below, as its owner's
        }
    }

    /** Waits for a job to end (tests). */
    static void awaitEnd(Job j, Duration d) throws InterruptedException, ExecutionException, TimeoutException {
        j.ended.get(d.toMillis(), TimeUnit.MILLISECONDS);
    }
}
