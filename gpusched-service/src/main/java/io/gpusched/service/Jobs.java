package io.gpusched.service;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.HolderProcess;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.JobLauncher;
import io.gpusched.isolation.JobSpec;
import io.gpusched.isolation.LaunchedJob;
import io.gpusched.server.Caller;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's jobs: each allocated for its caller (through the fair queue when it waits), started as the caller in
 * a fenced cgroup ({@link JobLauncher}), its output relayed to its client or its output file, and, however it ends
 * (exit, death, cancel, client gone, service stopping), its processes ended, cgroup removed, fence revoked and
 * allocation released. A job's allocation is bound to the service's own process and records the job's cgroup, so if
 * the service is killed, any process of the node reclaims it, and the next service ends what is left
 * ({@link #endLeftovers}).
 */
final class Jobs implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Jobs.class);
    /** Ended jobs that ran kept per user for {@code jobs} and {@code logs} (one user's jobs never evict another's). */
    static final int KEEP_ENDED = 100;
    /**
     * Ended jobs that never started (refused, dropped from the queue, cancelled while waiting) kept per user: apart
     * from those that ran, so a flood of refusals does not push a user's own finished jobs out either.
     */
    static final int KEEP_NEVER_STARTED = 20;
    /**
     * Most bytes of output kept for one user's ended detached jobs together (newest first; an older job's output file
     * is deleted past it, its record kept): with {@link #KEEP_ENDED} jobs of {@link OutputFile#MAX_BYTES} each, one
     * user could otherwise keep 6.4 GiB in the state directory. Tests shrink it.
     */
    static volatile long keepOutputBytes = 256L << 20;
    /** Bytes each user's running detached jobs have written together, by uid ({@link #liveOutput}). */
    private final Map<Long, AtomicLong> liveOutputBytes = new ConcurrentHashMap<>();
    /** How often an attached job's silent client is checked (a write), unless the service was built with another. */
    static final Duration HEARTBEAT = Duration.ofSeconds(5);
    /**
     * How long a job's end waits for each output relay at work (a pipe some process outside the job holds, silent or
     * writing); the time a relay waits for its client does not count.
     */
    static final Duration RELAY_WAIT = Duration.ofSeconds(10);
    /** {@link #RELAY_WAIT} once the service is stopping: its close grace (5 s) holds the let-go and exit line too. */
    static final Duration RELAY_WAIT_AT_STOP = Duration.ofSeconds(1);
    /**
     * Most bytes root's job's relays read after its processes ended: root's job may raise its pipes past
     * {@link #PIPE_MAX_BYTES} ({@code CAP_SYS_RESOURCE}), to this; a process outside the job that holds the pipe
     * cannot keep the service reading past it either.
     */
    static final long ROOT_PIPE_MAX_BYTES = 64L << 20;
    /**
     * The most a job's pipe can hold when its processes end ({@code /proc/sys/fs/pipe-max-size}: what an unprivileged
     * process may set with {@code F_SETPIPE_SZ}; 1 MiB where it cannot be read), plus a read in hand.
     */
    static final long PIPE_MAX_BYTES = pipeMaxSize() + 16 * 1024;
    /** How long a relay let go after {@link #RELAY_WAIT} may take to end before the exit line is given. */
    static final Duration RELAY_LET_GO = Duration.ofSeconds(2);

    private final GpuScheduler scheduler;
    private final JobLauncher launcher;
    private final String unavailable;
    private final CudaEnvironmentResolver cuda;
    private final FairQueue queue;
    private final AuditLog audit;
    private final Access access;
    private final Path outputDir;
    private final Duration grace;
    /** how often a silent attached client gets a line ({@link #HEARTBEAT} unless the service was built with another) */
    private final Duration heartbeat;
    private final Clock clock;
    private final SecureRandom random = new SecureRandom();
    private final Map<String, Job> jobs = new LinkedHashMap<>();
    private volatile boolean closing;

    /**
     * @param launcher    null when jobs cannot run here ({@code unavailable} says why)
     * @param outputDir   where detached jobs' output files go (made by {@link OutputFile#directory})
     */
    Jobs(GpuScheduler scheduler, JobLauncher launcher, String unavailable, CudaEnvironmentResolver cuda,
            FairQueue queue, AuditLog audit, Access access, Path outputDir, Duration grace, Duration heartbeat,
            Clock clock) {
        this.scheduler = scheduler;
        this.launcher = launcher;
        this.unavailable = unavailable;
        this.cuda = cuda;
        this.queue = queue;
        this.audit = audit;
        this.access = access;
        this.outputDir = outputDir;
        this.grace = grace;
        this.heartbeat = heartbeat;
        this.clock = clock;
    }

    /** Jobs cannot run on this node (no cgroup hierarchy, no setpriv, not root). */
    static final class Unavailable extends GpuException {
        private static final long serialVersionUID = 1L;

        Unavailable(String m) {
            super(m);
        }
    }

    /** A job that waited and was cancelled by its owner or an admin before it started (409 CANCELLED). */
    static final class Cancelled extends GpuException {
        private static final long serialVersionUID = 1L;

        Cancelled(String m) {
            super(m);
        }
    }

    /** No such job. */
    static final class UnknownJob extends GpuException {
        private static final long serialVersionUID = 1L;

        UnknownJob(String m) {
            super(m);
        }
    }

    // ------------------------------------------------------------------------------------------------ starting

    /**
     * Checks a job's request as its caller and registers it (QUEUED); nothing is allocated yet.
     *
     * @throws AccessDeniedException for a caller the kernel did not vouch for, or one naming another owner
     * @throws IllegalArgumentException for a request that is not valid, or a working directory the caller cannot enter
     * @throws Unavailable when jobs cannot run here
     */
    Job prepare(Caller c, Requests.Job r) {
        if (!c.identified()) {
            throw new AccessDeniedException("run a job", "node", Optional.empty(), List.of("any user of the node's"
                    + " socket"), "jobs run as their caller, so they are started through the node service's Unix"
                            + " socket; " + c.user() + " is not a caller the kernel vouched for");
        }
        if (r.request().owner().filter(o -> !o.equals(c.user())).isPresent()) {
            // a job runs as its caller and its GPUs are its caller's: another owner is refused for everyone, an admin
            // too (the name was dropped without a word: review29's note), before the owner check (which would tell a
            // user that an admin may: review31)
            String named = Requests.printable(r.request().owner().get());
            throw new IllegalArgumentException("--owner " + named + " is not taken for a job: a job runs as the user"
                    + " who starts it (" + c.user() + ") and its GPUs are that user's; start it as " + named
                    + ", or allocate for that owner without a job");
        }
        if (launcher == null) {
            throw new Unavailable("jobs cannot run on this node: " + unavailable);
        }
        if (closing) {
            throw new FairQueue.Dropped("the node service is stopping; no job is started"); // 503 SHUTTING_DOWN
        }
        try { // checked before anything is allocated (as every other field): run() resolves it on the GPUs granted
            Optional<CudaRequirement> req = r.cuda().map(CudaRequirement::parse);
            // a cuda requirement applies to NVIDIA GPUs (on AMD ones it is ignored): checked against the node's CUDA
            // installations (409 NO_MATCHING_CUDA) only when every GPU the job could be given is NVIDIA's
            List<GpuDevice> usable = scheduler.inventory().devices().stream().filter(r.request()::couldUse).toList();
            if (req.isPresent() && !usable.isEmpty() && usable.stream().allMatch(d -> d.vendor() == GpuVendor.NVIDIA)) {
                cuda.checkInstalled(req.get());
            }
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("\"cuda\": " + e.getMessage(), e);
        }
        JobSpec check = spec(c, r, r.env());
        Optional<String> cwd = launcher.checkWorkingDirectory(check);
        if (cwd.isPresent()) {
            throw new IllegalArgumentException("\"cwd\": " + cwd.get());
        }
        String id = "j" + HexFormat.of().formatHex(bytes(5));
        Optional<Path> out = Optional.empty();
        if (r.detach()) {
            out = Optional.of(outputDir.resolve(id + ".out"));
        }
        Job job = new Job(id, c, r, clock.instant(), out);
        synchronized (jobs) {
            jobs.put(id, job);
            trim();
        }
        return job;
    }

    private byte[] bytes(int n) {
        byte[] b = new byte[n];
        random.nextBytes(b);
        return b;
    }

    private static JobSpec spec(Caller c, Requests.Job r, Map<String, String> env) {
        return new JobSpec(r.argv(), env, Path.of(r.cwd()), c.uid(), c.gid(), c.user(), Optional.empty());
    }

    /**
     * @return the allocation request of a job: owned by its caller, bound to this process (its cgroup is recorded once
     *         made, named after the allocation: {@link #run})
     */
    private static GpuRequest requestOf(Job job) {
        return job.request.request().withOwner(job.owner.user(), job.owner.uid()).withJobId(job.id)
                .withHolder(HolderProcess.current());
    }

    /**
     * Allocates for the job: at once, or through the fair queue (telling the sink its position every heartbeat).
     *
     * @return the allocation, or empty when the job was cancelled or its client went while it waited
     * @throws GpuException the refusal (the job is then FAILED and over)
     */
    Optional<Allocation> allocate(Job job, JobSink sink) throws InterruptedException {
        try {
            GpuRequest req = requestOf(job);
            Optional<Duration> wait = job.request.maxWait();
            if (wait.isEmpty()) {
                return Optional.of(queue.now(job.owner, req)); // in its fair place among those that wait
            }
            FairQueue.Ticket t = job.ticket != null ? job.ticket : queue.enqueue(job.owner, req, wait.get(),
                    sink::gone);
            job.ticket = t;
            long first = TimeUnit.MILLISECONDS.toNanos(200);
            while (true) {
                try {
                    Allocation a = t.result.get(first > 0 ? first : heartbeat.toNanos(), TimeUnit.NANOSECONDS);
                    job.ticket = null;
                    return Optional.of(a);
                } catch (TimeoutException stillWaiting) {
                    first = 0;
                    if (job.cancelled != null) {
                        queue.cancel(t, job.cancelled);
                        continue;
                    }
                    try {
                        sink.queued(t.position());
                    } catch (IOException gone) {
                        job.cancelled = FairQueue.CLIENT_WENT;
                        job.clientWent = true;
                        queue.cancel(t, job.cancelled);
                    }
                } catch (ExecutionException e) {
                    job.ticket = null;
                    if (e.getCause() instanceof FairQueue.Dropped d) {
                        if (job.cancelled == null) {
                            job.cancelled = d.getMessage();
                            job.clientWent = d instanceof FairQueue.ClientGone;
                        }
                        end(job, Job.State.CANCELLED, null);
                        return Optional.empty();
                    }
                    throw e.getCause() instanceof RuntimeException re ? re : new GpuException(e.getMessage());
                }
            }
        } catch (RuntimeException e) {
            job.failure = e.getMessage();
            end(job, Job.State.FAILED, null);
            throw e;
        } catch (InterruptedException e) {
            FairQueue.Ticket t = job.ticket;
            if (t != null) {
                queue.cancel(t, "the service is stopping");
            }
            job.cancelled = "the service is stopping";
            end(job, Job.State.CANCELLED, null);
            throw e;
        }
    }

    /**
     * @return what a job cancelled before it started answers its caller: {@link Cancelled} (409 CANCELLED) when its
     *         owner or an admin cancelled it, {@link FairQueue.ClientGone} when its client went (400 CLIENT_GONE, for
     *         a client that half-closed and still reads), else {@link FairQueue.Dropped} (the service stops)
     */
    static RuntimeException notStarted(Job job) {
        String why = "job " + job.id + " was not started: " + Optional.ofNullable(job.cancelled).orElse("cancelled");
        return job.cancelledBy ? new Cancelled(why) : job.clientWent ? new FairQueue.ClientGone(why)
                : new FairQueue.Dropped(why);
    }

    /**
     * Queues a job that may wait, now, so that a refusal (the user's waiting limit, a request this node can never
     * serve) is its caller's answer; {@link #allocate} then waits on the ticket.
     *
     * @throws GpuException the refusal (the job is then FAILED and over)
     */
    void enqueue(Job job, JobSink sink) {
        try {
            job.ticket = queue.enqueue(job.owner, requestOf(job), job.request.maxWait().orElseThrow(), sink::gone);
        } catch (RuntimeException e) {
            job.failure = e.getMessage();
            end(job, Job.State.FAILED, null);
            throw e;
        }
    }

    /**
     * Starts the job on its allocation as its caller, relays its output to the sink until it ends, then undoes
     * everything. Blocks until the job is over; always releases the allocation.
     *
     * @throws GpuException when it cannot be started (the job is FAILED)
     */
    void run(Job job, Allocation a, JobSink sink) throws InterruptedException {
        job.allocation = a;
        if (job.cancelled != null) { // cancelled while its GPUs were being allocated: its caller is told why
            end(job, Job.State.CANCELLED, null);
            settle(job, a);
            throw notStarted(job);
        }
        LaunchedJob l = null;
        List<OutputRelay> relays = new ArrayList<>();
        try {
            Map<String, String> env;
            try {
                CudaRequirement req = job.request.cuda().map(CudaRequirement::parse).orElse(CudaRequirement.NONE);
                env = cuda.resolve(a, req).applyTo(job.request.env());
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("\"cuda\": " + e.getMessage(), e);
            }
            // the cgroup is job-<allocation id>, recorded in the node ledger before the job starts: whoever reclaims
            // the allocation (this service's successor, any process of the node) ends the job's processes first
            l = launcher.launch(job.id, spec(job.owner, job.request, env), a,
                    cg -> scheduler.recordJobCgroup(a.id(), cg));
            job.launched = l;
            if (job.cancelled != null) {
                // cancelled (or the service closing) while it was being launched: the canceller found nothing to end
                // yet (launched is read after cancelled is set, and set here before cancelled is read), so it ends here
                terminateAsync(job);
            }
            job.startedAt = clock.instant();
            job.state = Job.State.RUNNING;
            audit.record(job.owner, "job.start", job.id, String.join(" ", job.request.argv()), "ok",
                    "allocation " + a.id() + " GPUs " + a.deviceIndices() + " cgroup " + l.cgroup());
            LaunchedJob launched = l;
            try {
                sink.started(job);
            } catch (IOException gone) {
                clientGone(job);
            }
            relays.add(new OutputRelay(job.id, launched.stdout(), false, sink, () -> clientGone(job)));
            relays.add(new OutputRelay(job.id, launched.stderr(), true, sink, () -> clientGone(job)));
            // the driver never waits on the client: a heartbeat skips a stream whose write is blocked (StreamSink), so
            // a client that does not read cannot keep the driver from seeing the job end
            Optional<Integer> exited;
            while ((exited = launched.waitFor(heartbeat)).isEmpty()) {
                if (job.cancelled == null) {
                    try {
                        sink.heartbeat();
                    } catch (IOException gone) {
                        clientGone(job);
                    }
                }
            }
            int code = exited.get();
            String left = launched.cleanUp(); // ends what the job left running: its pipes close, the relays end
            // from here on a pipe holds at most what it held when the job's processes ended; more comes from a process
            // outside the job (it was passed the pipe): a relay takes no more than that, however slowly its client
            // reads, and lets the pipe go
            // (root's job may have raised its pipes past pipe-max-size: CAP_SYS_RESOURCE; up to ROOT_PIPE_MAX_BYTES)
            relays.forEach(r -> r.jobEnded(job.owner.uid() == 0 ? Math.max(ROOT_PIPE_MAX_BYTES, PIPE_MAX_BYTES)
                    : PIPE_MAX_BYTES));
            sink.jobEnded();
            job.exitCode = code;
            job.signal = LaunchedJob.signalOf(code).orElse(null);
            if (!left.isEmpty()) {
                job.failure = left;
            }
            end(job, job.cancelled != null ? Job.State.CANCELLED : job.signal != null ? Job.State.KILLED
                    : Job.State.EXITED, null);
            settle(job, a); // released before the client is told: its exit line may wait on the client
            awaitOutput(relays); // the rest of the output goes before the exit line
            letGo(relays); // those still reading a pipe some process outside the job holds: before the exit line
            try {
                sink.exit(code, job.signal);
            } catch (IOException gone) {
                LOG.debug("the client of job {} went before its exit was told", job.id);
            }
        } catch (RuntimeException e) {
            job.failure = e.getMessage();
            end(job, Job.State.FAILED, e);
            throw e;
        } finally {
            settle(job, a);
            // a relay still reading a pipe that a process outside the job holds (the job passed it on) is let go:
            // its read ends on the interrupt (LaunchedJob.stdout), and that process's writes fail from then on
            relays.forEach(OutputRelay::letGo);
        }
    }

    private static long pipeMaxSize() {
        try {
            // one read of a whole buffer: Files.readString reads a /proc file of "size 0" a byte first (JDK 17: "1")
            List<String> lines = Files.readAllLines(Path.of("/proc/sys/fs/pipe-max-size"));
            return Math.max(64 * 1024, Long.parseLong(lines.get(0).strip()));
        } catch (IOException | RuntimeException e) {
            return 1 << 20;
        }
    }

    /**
     * Waits for the job's output to be relayed (its processes are ended: what its pipes hold is read at once): for as
     * long as the output waits for a client that reads slowly (or not yet: it may read again, and then gets all of it
     * before its exit line; it is cut when it goes or the console closes). A relay that has been at work for
     * {@link #RELAY_WAIT} since the job ended ({@link #RELAY_WAIT_AT_STOP} when the service is stopping) relays a pipe
     * some process outside the job holds: it is not waited for.
     */
    private void awaitOutput(List<OutputRelay> relays) throws InterruptedException {
        for (OutputRelay r : relays) {
            while (r.isAlive() && r.activeSinceEnd().compareTo(closing ? RELAY_WAIT_AT_STOP : RELAY_WAIT) < 0) {
                r.join(100);
            }
        }
    }

    /**
     * Lets go the relays still running once their wait is over (a pipe that a process outside the job holds: the job
     * passed it on): each is let go ({@link OutputRelay#letGo}: a read under way ends, output under way completes),
     * and waited for a moment, so that what it read last goes before the exit line (a relay that does not end then is
     * dropped by the sink).
     */
    private static void letGo(List<OutputRelay> relays) throws InterruptedException {
        for (OutputRelay r : relays) {
            if (r.isAlive()) {
                r.letGo();
            }
        }
        long deadline = System.nanoTime() + RELAY_LET_GO.toNanos(); // one wait for all: the let-go takes 2 s at most
        for (OutputRelay r : relays) {
            long left = deadline - System.nanoTime();
            if (r.isAlive() && left > 0) {
                r.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    /**
     * Undoes a job once it is over: ends what is left of it, releases its allocation (unless a process of it could not
     * be ended), applies its owner's output budget, then completes {@code settled}. Once only; waits for nothing of the
     * client's.
     */
    private void settle(Job job, Allocation a) {
        if (job.settled.isDone()) {
            return;
        }
        LaunchedJob l = job.launched;
        if (l != null) {
            String left = l.cleanUp();
            if (!left.isEmpty()) {
                LOG.warn("job {}: {}", job.id, left);
            }
        }
        release(job, a);
        try {
            if (job.output.isPresent()) {
                synchronized (jobs) {
                    trim(); // its output is final now: the owner's output budget is applied at once
                }
            }
        } finally {
            job.settled.complete(null); // last: close() waits for it, and nothing of the job's is touched after
        }
    }

    private void release(Job job, Allocation a) {
        LaunchedJob l = job.launched;
        if (l != null && !l.cleanedUp()) {
            LOG.warn("job {}: its cgroup {} could not be emptied; allocation {} stays held so its GPUs are not"
                    + " handed out under a running process", job.id, l.cgroup(), a.id());
            return;
        }
        try {
            scheduler.release(a.id());
        } catch (RuntimeException e) {
            LOG.warn("job {}: releasing allocation {} failed: {}", job.id, a.id(), e.toString());
        }
    }

    private void clientGone(Job job) {
        if (job.cancelled != null || job.over()) {
            return; // a client that goes after its job ended (its output still being relayed) ends nothing
        }
        job.cancelled = "its client went away";
        audit.record(job.owner, "job.client-gone", job.id, null, "ending", "TERM, KILL after " + grace);
        terminateAsync(job);
    }

    private void terminateAsync(Job job) {
        LaunchedJob l = job.launched;
        if (l == null) {
            return;
        }
        Thread t = new Thread(() -> {
            try {
                l.terminate(grace);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                LOG.warn("ending job {} failed: {}", job.id, e.toString());
            }
        }, "gpusched-job-end-" + job.id);
        t.setDaemon(true);
        t.start();
    }

    private void end(Job job, Job.State state, RuntimeException e) {
        if (job.over()) {
            return;
        }
        job.state = state;
        job.endedAt = clock.instant();
        audit.record(job.owner, "job.end", job.id, null, state.name(), (job.exitCode == null ? ""
                : "exit " + job.exitCode + (job.signal == null ? "" : " (" + job.signal + ")") + " ")
                + (job.cancelled != null ? job.cancelled : job.failure != null ? job.failure : ""));
        job.ended.complete(null);
    }

    /**
     * A detached job: allocates at once or queues (a refusal, either way, is the caller's answer), then runs on a
     * thread of its own, its output going to its file.
     *
     * @return the job (QUEUED or RUNNING)
     */
    Job detach(Job job) throws InterruptedException {
        OutputFile out;
        try {
            out = OutputFile.create(outputDir, job.id, liveOutput(job.owner.uid()));
        } catch (IOException e) {
            job.failure = "cannot make its output file: " + e.getMessage();
            job.outputFinal.complete(null);
            end(job, Job.State.FAILED, null);
            throw new GpuException(job.failure);
        }
        Optional<Allocation> now = Optional.empty();
        try { // a refusal goes to the caller: at once, or when it cannot wait in the queue
            if (job.request.maxWait().isEmpty()) {
                now = allocate(job, out);
            } else {
                enqueue(job, out);
            }
        } catch (RuntimeException e) {
            try {
                out.exit(0, null);
                Files.deleteIfExists(out.path());
            } catch (IOException ignored) {
                // nothing was written to it
            } finally {
                job.outputFinal.complete(null);
            }
            throw e;
        }
        Optional<Allocation> first = now;
        Thread t = new Thread(() -> {
            try {
                Optional<Allocation> a = first.isPresent() ? first : allocate(job, out);
                if (a.isPresent()) {
                    run(job, a.get(), out);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                LOG.info("detached job {} failed: {}", job.id, e.getMessage());
            } finally {
                try {
                    out.exit(0, null);
                } catch (IOException e) {
                    LOG.debug("closing the output of {}: {}", job.id, e.toString());
                } finally {
                    try {
                        synchronized (jobs) {
                            trim(); // again, now that it is final: what its relays wrote after its end counts too
                        }
                    } finally {
                        job.outputFinal.complete(null); // logs of the ended job read all of it from here on
                    }
                }
            }
        }, "gpusched-job-" + job.id);
        t.setDaemon(true);
        t.start();
        if (first.isPresent()) {
            for (int i = 0; i < 500 && job.state == Job.State.QUEUED && !job.over(); i++) {
                Thread.sleep(10); // answer with the job started (or failed to start), not half-way
            }
        }
        return job;
    }

    // ------------------------------------------------------------------------------------------------ managing

    /** @return the job @throws UnknownJob when there is none by that id */
    Job get(String id) {
        synchronized (jobs) {
            Job j = jobs.get(id);
            if (j == null) {
                throw new UnknownJob("no job \"" + Requests.printable(id) + "\" (the service keeps its jobs while it"
                        + " runs, and of each user's ended jobs the last " + KEEP_ENDED + " that ran and the last "
                        + KEEP_NEVER_STARTED + " that never started; gpusched jobs lists them)");
            }
            return j;
        }
    }

    /** @return every job, oldest first */
    List<Job> all() {
        synchronized (jobs) {
            return List.copyOf(jobs.values());
        }
    }

    /**
     * Caller holds {@code jobs}. Forgets each user's ended jobs past the last {@link #KEEP_ENDED} that ran and the last
     * {@link #KEEP_NEVER_STARTED} that never started, deleting a forgotten job's output file (no one reaches it any
     * more: it is root's, read through {@code logs}).
     */
    private void trim() {
        Map<Long, long[]> outputKept = new HashMap<>();
        Map<Long, int[]> kept = new HashMap<>();
        List<Job> newestFirst = new ArrayList<>(jobs.values());
        Collections.reverse(newestFirst);
        // ended jobs by when they ended, the latest first (review51: a long job submitted early was the first whose
        // output went, at its end); a stable sort keeps the order of submission for the rest
        newestFirst.sort(Comparator.comparing((Job j) -> j.endedAt == null ? Instant.MAX : j.endedAt).reversed());
        for (Job j : newestFirst) {
            if (!j.over()) {
                continue;
            }
            int[] n = kept.computeIfAbsent(j.owner.uid(), k -> new int[2]);
            boolean ran = j.startedAt != null;
            if (++n[ran ? 0 : 1] > (ran ? KEEP_ENDED : KEEP_NEVER_STARTED)) {
                jobs.remove(j.id);
                deleteOutput(j);
            } else if (j.output.isPresent() && j.outputDropped == null) {
                long[] bytes = outputKept.computeIfAbsent(j.owner.uid(), k -> new long[1]);
                try {
                    bytes[0] += Files.size(j.output.get());
                } catch (IOException e) {
                    continue; // none (never started, or gone)
                }
                if (bytes[0] > keepOutputBytes) {
                    j.outputDropped = "its output was deleted: the output kept of " + j.owner.user() + "'s ended jobs"
                            + " passed " + keepOutputBytes + " bytes, and newer jobs' output is kept first";
                    deleteOutput(j);
                }
            }
        }
    }

    /**
     * @return the budget of a user's running detached jobs' output together: {@link #keepOutputBytes}, as for their
     *     ended jobs (else 100 jobs at once, 16 per shared GPU, could write 64 MiB each into the state directory)
     */
    private OutputFile.Budget liveOutput(long uid) {
        AtomicLong used = liveOutputBytes.computeIfAbsent(uid, k -> new AtomicLong());
        return new OutputFile.Budget() {
            @Override
            public long take(long want) {
                while (true) {
                    long cur = used.get();
                    long n = Math.max(0, Math.min(want, keepOutputBytes - cur));
                    if (used.compareAndSet(cur, cur + n)) {
                        return n;
                    }
                }
            }

            @Override
            public void giveBack(long n) {
                used.addAndGet(-n);
            }

            @Override
            public long size() {
                return keepOutputBytes;
            }
        };
    }

    private static void deleteOutput(Job j) {
        if (j.output.isPresent()) {
            try {
                Files.deleteIfExists(j.output.get());
            } catch (IOException e) {
                LOG.warn("job {}: its output file could not be deleted: {}", j.id, e.toString());
            }
        }
    }

    /**
     * Passes a signal to every process of a running job.
     *
     * @return how many processes it reached
     */
    int signal(Caller c, String id, String signal) {
        Job j = get(id);
        access.checkJob(c, "signal", id, j.owner.user(), j.owner.uid());
        LaunchedJob l = j.launched;
        if (l == null || j.over()) {
            throw new IllegalStateException("job " + id + " is " + j.state + ", not running: nothing to signal");
        }
        return l.signal(signal);
    }

    /** Cancels a job: out of the queue, or TERM then KILL after the grace period. Waits until it is over. */
    Job cancel(Caller c, String id) throws InterruptedException {
        Job j = get(id);
        access.checkJob(c, "cancel", id, j.owner.user(), j.owner.uid());
        if (j.over()) {
            return j;
        }
        j.cancelledBy = true;
        j.cancelled = "cancelled by " + c.user() + " (uid " + c.uid() + ")";
        FairQueue.Ticket t = j.ticket;
        if (t != null) {
            queue.cancel(t, j.cancelled);
        }
        LaunchedJob l = j.launched;
        if (l != null) {
            l.terminate(grace);
        }
        try {
            j.ended.get(grace.toMillis() + 30_000, TimeUnit.MILLISECONDS);
            if (j.allocation != null) { // answered once its GPUs are released: a cancelled job's GPUs are free when it
                // returns (also one cancelled while it was being launched: read after the end, as close() does)
                j.settled.get(30_000, TimeUnit.MILLISECONDS);
            }
        } catch (ExecutionException | TimeoutException e) {
            LOG.warn("job {} did not end within its grace period after a cancel", id);
        }
        return j;
    }

    /**
     * Copies a detached job's output to {@code out}; with {@code follow}, until the job has ended.
     *
     * @throws IllegalStateException for an attached job (its output went to its client)
     */
    void logs(Caller c, String id, boolean follow, OutputStream out) throws IOException, InterruptedException {
        Job j = get(id);
        access.checkJob(c, "read the logs of", id, j.owner.user(), j.owner.uid());
        if (j.output.isEmpty()) {
            throw new IllegalStateException("job " + id + " is attached: its output went to its client; only"
                    + " detached jobs (run --detach) keep an output file");
        }
        Path f = j.output.get();
        if (j.outputDropped != null) {
            throw new IllegalStateException("job " + id + ": " + j.outputDropped);
        }
        if (j.over()) { // its state turns before its output file is final: read the file once it is
            awaitOutputFinal(j); // (NodeService.checkLogs waited already, before the answer's head)
        }
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
            String why = j.outputDropped; // deleted since (the output budget): say why
            throw new IllegalStateException("job " + id + (why != null ? ": " + why : " has no output file (" + f
                    + ")"));
        }
        try (FileChannel ch = FileChannel.open(f, Set.of(StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS))) {
            InputStream in = Channels.newInputStream(ch);
            byte[] buf = new byte[16 * 1024];
            while (true) {
                int n = in.read(buf);
                if (n > 0) {
                    out.write(buf, 0, n);
                    continue;
                }
                if (!follow || j.over()) {
                    if (j.over()) { // what was written between the last read and the end, and until the output is
                        // final (the relays' last bytes, a note of what was lost)
                        awaitOutputFinal(j);
                        while ((n = in.read(buf)) > 0) {
                            out.write(buf, 0, n);
                        }
                    }
                    out.flush();
                    return;
                }
                out.flush();
                try {
                    j.ended.get(250, TimeUnit.MILLISECONDS);
                } catch (TimeoutException | ExecutionException e) {
                    // not yet: read again
                }
            }
        }
    }

    /**
     * Waits until an ended detached job's output file is final: its relays wait for the pipes at most
     * {@link #RELAY_WAIT}, then let each go within {@link #RELAY_LET_GO}; past that (a bound with room to spare) the
     * file is read as it is.
     */
    static void awaitOutputFinal(Job j) throws InterruptedException {
        try {
            j.outputFinal.get(RELAY_WAIT.plus(RELAY_LET_GO.multipliedBy(2)).toMillis() + 5_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            LOG.warn("job {}: its output file was not final {} after it ended; read as it is", j.id, RELAY_WAIT);
        }
    }

    // ------------------------------------------------------------------------------------------------ life

    /**
     * Ends what a previous service left: every job cgroup under the parent (this service has none yet), and every
     * live allocation that names one of them.
     *
     * @return what was done
     */
    List<String> endLeftovers() {
        List<String> out = new ArrayList<>();
        if (launcher == null) {
            return out;
        }
        out.addAll(launcher.endLeftovers(id -> false));
        String parent = launcher.cgroupParent().toString() + "/";
        for (Allocation a : scheduler.allocations()) {
            Optional<String> cg = a.request().jobCgroup();
            if (cg.isPresent() && cg.get().startsWith(parent)) {
                try {
                    scheduler.release(a.id());
                    out.add("released " + a.id() + " of " + a.owner().orElse("?") + " (its job " + a.request().jobId()
                            .orElse("?") + " was running when the service stopped)");
                } catch (RuntimeException e) {
                    out.add("releasing " + a.id() + " failed: " + e.getMessage());
                }
            }
        }
        return out;
    }

    /** Cancels every job (TERM, KILL after the grace period, in parallel) and waits for them to be over. */
    @Override
    public void close() {
        closing = true;
        List<Job> live = all().stream().filter(j -> !j.over()).toList();
        for (Job j : live) {
            j.cancelled = "the node service stopped";
            FairQueue.Ticket t = j.ticket;
            if (t != null) {
                queue.cancel(t, j.cancelled);
            }
            terminateAsync(j);
        }
        // one deadline for all: the jobs end in parallel, so a few that cannot die (D state, frozen) do not add up
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(grace.toMillis() + 30_000);
        boolean interrupted = false;
        for (Job j : live) {
            while (true) {
                try {
                    j.ended.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                    // ended comes before the release: wait for it too, or the GPUs are released after close returned
                    // (the allocation is read after the end: a job granted while this ran has it set by then)
                    if (j.allocation != null) {
                        j.settled.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                    }
                    break;
                } catch (InterruptedException e) {
                    interrupted = true; // still waited for, within the deadline: a stop returns with no job left
                } catch (ExecutionException | TimeoutException e) {
                    LOG.warn("job {} did not end while the service stopped", j.id);
                    break;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
