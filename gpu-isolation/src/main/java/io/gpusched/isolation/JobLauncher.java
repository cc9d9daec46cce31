package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Starts a job as its user in a fenced cgroup of its own: makes {@code <parent>/job-<job id>}, fences it to
 * exactly the allocation's device nodes ({@link CgroupDeviceIsolator}, v1 or v2 by the parent's hierarchy), and starts
 * the command so that nothing of the user's runs as root:
 * <ol>
 *   <li>a root shell with a fixed environment ({@code PATH} only) writes its own pid into the cgroup's
 *       {@code cgroup.procs} and executes</li>
 *   <li>{@code setpriv --reuid --regid --init-groups --pdeathsig KILL} (util-linux), which switches to the user's uid,
 *       gid and supplementary groups, sets the parent-death signal and executes</li>
 *   <li>a shell, now the user, that checks its parent is still this JVM (else the death signal came too late), reads
 *       the job's environment from its stdin (written by this class as {@code export NAME='value'} lines, quoted so no
 *       value is ever expanded) and evaluates it, enters the working directory with the user's own permissions,
 *       and executes the command with stdin from {@code /dev/null}, through coreutils {@code env --default-signal}
 *       (8.31 and later), so a job starts with every signal at its default even when this process was started with
 *       some ignored ({@code nohup}), and one more shell's {@code exec}, so a file the kernel cannot execute is
 *       refused as a shell refuses it (126), not run as shell text as {@code execvp} would.</li>
 * </ol>
 * So the variables the dynamic loader, the shell or the JVM read ({@code LD_PRELOAD}, {@code GCONV_PATH},
 * {@code BASH_ENV}, {@code JAVA_TOOL_OPTIONS}, ...) reach only processes that already run as the user; the environment
 * never appears in an argument list (which other users could read in {@code /proc}).
 *
 * <p>Processes are started from one thread of this launcher that lives as long as it does: Linux sends the parent-death
 * signal when the thread that started the child ends, not the process. A job's processes are ended with the cgroup
 * ({@code cgroup.kill}, else SIGKILL to each), whatever they forked; see {@link LaunchedJob#cleanUp()}.
 */
public final class JobLauncher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(JobLauncher.class);
    /** The default name of the parent of job cgroups at the root of a hierarchy. */
    public static final String DEFAULT_PARENT_NAME = "gpusched.jobs";
    private static final Pattern JOB_DIR = Pattern.compile("job-[A-Za-z0-9_.-]{1,200}");
    private static final String ROOT_SCRIPT = "echo $$ > \"$1/cgroup.procs\" || exit 125; shift; exec \"$@\"";
    private static final String USER_SCRIPT = "[ \"$PPID\" = \"$0\" ] || exit 125\n"
            + "eval \"$(/bin/cat)\" || exit 125\n"
            + "cd -- \"$1\" 2>/dev/null || { printf '%s\\n' \"$2\" >&2; exit 126; }\n"
            + "shift 2\n"
            + "exec \"$@\" </dev/null\n";
    /** How long the check that a job's user can enter its working directory may take (an automounted home: seconds). */
    static final Duration CWD_CHECK = Duration.ofSeconds(10);
    /** The root side's whole environment. */
    static final Map<String, String> ROOT_ENV = Map.of("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");

    private final CgroupDeviceIsolator isolator;
    private final Path parent;
    private final Path hierarchy;
    private final Path setpriv;
    /** {@code env --default-signal --} where coreutils has it (8.31 and later), else empty. */
    private final List<String> defaultSignals;
    private static final String ENV = "/usr/bin/env";
    private final ExecutorService starter;
    /** The gid every job gets besides its user's groups; -1: none. */
    private final long jobGid;

    private JobLauncher(Builder b) {
        this.isolator = b.isolator;
        Path root = b.parent != null ? null : isolator.v2Root().or(isolator::v1Root).orElseThrow(
                () -> new IsolationException("no cgroup hierarchy for jobs: " + isolator.unavailabilityCause()
                        .orElse("neither cgroup2 nor a v1 devices hierarchy is mounted")));
        this.parent = b.parent != null ? b.parent : root.resolve(DEFAULT_PARENT_NAME);
        Optional<Path> h = isolator.v2Root().filter(parent::startsWith).or(() -> isolator.v1Root().filter(
                parent::startsWith));
        this.hierarchy = h.orElseThrow(() -> new IsolationException("the job cgroup parent " + parent + " is not"
                + " inside a mounted cgroup hierarchy (cgroup2 at " + isolator.v2Root().map(Path::toString).orElse(
                        "none")
                + ", v1 devices at " + isolator.v1Root().map(Path::toString).orElse("none") + ")"));
        if (parent.equals(hierarchy) || !parent.isAbsolute() || !parent.normalize().equals(parent)) {
            throw new IsolationException("the job cgroup parent must be below the root of its hierarchy and"
                    + " normalized, was " + parent);
        }
        this.setpriv = b.setpriv;
        this.jobGid = b.jobGroup == null ? -1 : gidOf(b.jobGroup);
        if (!Files.isExecutable(setpriv)) {
            throw new IsolationException("cannot run jobs as their user: " + setpriv + " (util-linux setpriv) is"
                    + " missing");
        }
        // a service started with signals ignored (nohup, a shell's background job) would hand that on through exec
        this.defaultSignals = lookup(List.of(ENV, "--default-signal", "/bin/echo", "ok")).isPresent()
                ? List.of(ENV, "--default-signal", "--") : List.of();
        if (defaultSignals.isEmpty()) {
            LOG.info("{} has no --default-signal (coreutils before 8.31): jobs inherit the signals this process"
                    + " ignores", ENV);
        }
        this.starter = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "gpusched-job-starter");
            t.setDaemon(true);
            return t;
        });
    }

    /** @return a builder */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the directory job cgroups are made in */
    public Path cgroupParent() {
        return parent;
    }

    /** @return the isolator fencing the jobs */
    public CgroupDeviceIsolator isolator() {
        return isolator;
    }

    /**
     * @param jobId the job's id: letters, digits, {@code _ . -}, 1 to 200 characters
     * @return the cgroup directory the job gets: {@code <parent>/job-<jobId>}
     * @throws IsolationException for an id that cannot name a cgroup
     */
    public Path cgroupFor(String jobId) {
        String name = "job-" + jobId;
        if (!JOB_DIR.matcher(name).matches() || jobId.startsWith(".")) {
            throw new IsolationException("job id \"" + JobSpec.printable(jobId) + "\" cannot name a cgroup (letters,"
                    + " digits, _ . -, at most 200)");
        }
        return parent.resolve(name);
    }

    /** @return the cgroup's path below its hierarchy's mount, as {@code /proc/<pid>/cgroup} shows it */
    String relative(Path cgroup) {
        return "/" + hierarchy.relativize(cgroup);
    }

    /**
     * Checks, as the user, that the working directory can be entered ({@code setpriv} then {@code cd}).
     *
     * @return empty when it can; else a sentence saying it cannot
     */
    public Optional<String> checkWorkingDirectory(JobSpec spec) {
        List<String> cmd = new ArrayList<>(switchTo(spec));
        cmd.addAll(List.of("/bin/sh", "-c", "cd -- \"$1\"", "gpusched-cwd-check", spec.cwd().toString()));
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            pb.environment().clear();
            pb.environment().putAll(ROOT_ENV);
            Process p = pb.start();
            p.getOutputStream().close();
            // the wait is bounded before anything is read: the check runs as the user, who may stop it (SIGSTOP)
            // with the pipe still open, and a read first would then hold this thread for good
            if (!p.waitFor(CWD_CHECK.toSeconds(), TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.getInputStream().close();
                return Optional.of("checking the working directory " + spec.cwd() + " as " + spec.user() + " took"
                        + " over " + CWD_CHECK.toSeconds() + " s");
            }
            InputStream in = p.getInputStream();
            byte[] out = in.readNBytes(Math.min(4096, in.available())); // what the ended check left in the pipe
            in.close();
            if (p.exitValue() == 0) {
                return Optional.empty();
            }
            String why = new String(out, StandardCharsets.UTF_8).strip().replaceAll("[^\\x20-\\x7e]", "?");
            return Optional.of(spec.user() + " (uid " + spec.uid() + ") cannot enter the working directory "
                    + JobSpec.printable(spec.cwd().toString()) + (why.isEmpty() ? "" : ": " + why));
        } catch (IOException e) {
            return Optional.of("cannot check the working directory: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.of("interrupted while checking the working directory");
        }
    }

    private List<String> switchTo(JobSpec spec) {
        String groups = "--init-groups";
        if (jobGid >= 0) { // the user's own groups (as NSS has them) and the job group
            String own = lookup(List.of("/usr/bin/id", "-G", "--", spec.user())).orElseThrow(
                    () -> new IsolationException("the groups of " + spec.user() + " cannot be looked up (id -G)"));
            if (!own.matches("[0-9 ]{1,65536}")) {
                throw new IsolationException("id -G " + spec.user() + " answered \"" + JobSpec.printable(own) + "\"");
            }
            groups = "--groups=" + String.join(",", own.trim().split(" +")) + "," + jobGid;
        }
        return List.of(setpriv.toString(), "--reuid=" + spec.uid(), "--regid=" + spec.gid(), groups,
                "--pdeathsig=KILL", "--");
    }

    private static long gidOf(String group) {
        String line = lookup(List.of("/usr/bin/getent", "group", "--", group)).orElseThrow(
                () -> new IsolationException("gpu.service.job_group: group \"" + JobSpec.printable(group)
                        + "\" does not exist (getent group)"));
        String[] f = line.split(":", -1);
        if (f.length < 3 || !f[2].matches("[0-9]{1,10}")) {
            throw new IsolationException("getent group " + group + " answered \"" + JobSpec.printable(line) + "\"");
        }
        return Long.parseLong(f[2]);
    }

    private static Optional<String> lookup(List<String> cmd) {
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD);
            pb.environment().clear();
            pb.environment().putAll(ROOT_ENV);
            Process p = pb.start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readNBytes(65536), StandardCharsets.UTF_8).strip();
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return Optional.empty();
            }
            return p.exitValue() == 0 && !out.isEmpty() ? Optional.of(out.lines().findFirst().orElse(""))
                    : Optional.empty();
        } catch (IOException e) {
            return Optional.empty();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    /**
     * Makes the job's cgroup ({@link #cgroupFor}), fences it to the allocation, and starts the job as its user.
     *
     * @param jobId the job's id (names its cgroup)
     * @throws IsolationException when the cgroup exists already, cannot be made or fenced, or the job cannot be
     *                            started; nothing is left behind
     */
    public LaunchedJob launch(String jobId, JobSpec spec, Allocation allocation) {
        return launch(jobId, cgroupFor(jobId), spec, allocation, made -> {});
    }

    /**
     * Starts a job as {@link #launch(String, JobSpec, Allocation)} does, in the cgroup the node ledger names for its
     * allocation ({@code <parent>/job-<allocation id>}, {@link io.gpusched.core.host.JobCgroups#name}), and hands that
     * cgroup, made and fenced, to {@code beforeStart} before anything of the user's runs: a host records it there
     * ({@code GpuScheduler.recordJobCgroup}) so that whoever reclaims the allocation ends the job first. An exception
     * from {@code beforeStart} undoes the cgroup and the fence and is thrown.
     *
     * @param jobId       the job's id (for the log)
     * @param spec        what to run, as whom
     * @param allocation  its GPUs
     * @param beforeStart given the job's cgroup before the job starts
     * @return the running job
     * @throws IsolationException when the cgroup cannot be made or fenced, or the job cannot start
     */
    public LaunchedJob launch(String jobId, JobSpec spec, Allocation allocation, Consumer<Path> beforeStart) {
        return launch(jobId, cgroupFor(allocation.id()), spec, allocation, beforeStart);
    }

    private LaunchedJob launch(String jobId, Path cgroup, JobSpec spec, Allocation allocation,
            Consumer<Path> beforeStart) {
        Objects.requireNonNull(spec, "spec");
        try {
            Files.createDirectories(parent);
            Files.createDirectory(cgroup);
        } catch (IOException e) {
            throw new IsolationException("cannot make the job cgroup " + cgroup + ": " + e);
        }
        Fence fence = null;
        try {
            fence = isolator.fence(cgroup, allocation);
            beforeStart.accept(cgroup);
            List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c", ROOT_SCRIPT, "gpusched-job",
                    cgroup.toString()));
            cmd.addAll(switchTo(spec));
            cmd.addAll(List.of("/bin/sh", "-c", USER_SCRIPT, Long.toString(ProcessHandle.current().pid()),
                    spec.cwd().toString(), "gpusched: " + spec.user() + " (uid " + spec.uid() + ") cannot enter the"
                            + " working directory " + spec.cwd()));
            if (!defaultSignals.isEmpty()) {
                // env executes through execvp, which hands a file the kernel cannot execute (ENOEXEC: another
                // architecture's binary, a corrupt one) to /bin/sh as shell text (127, "ELF...: not found"), and
                // would take a first word NAME=VALUE for an assignment; a shell's exec, as a local run's, refuses a
                // binary (126, "Exec format error") and runs only a text file without #! as a script
                cmd.addAll(defaultSignals);
                cmd.addAll(List.of("/bin/sh", "-c", "exec \"$@\"", "gpusched-job"));
            }
            cmd.addAll(spec.argv());
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.environment().clear();
            pb.environment().putAll(ROOT_ENV);
            pb.directory(Path.of("/").toFile());
            JobPipes pipes = null;
            if (spec.output().isPresent()) {
                pb.redirectOutput(ProcessBuilder.Redirect.appendTo(spec.output().get().toFile()))
                        .redirectErrorStream(true);
            } else {
                pipes = JobPipes.open(); // reads that can be let go (a pipe some outside process holds); else the JDK's
                if (pipes != null) {
                    pipes.redirect(pb);
                }
            }
            Process p;
            try {
                p = starter.submit(pb::start).get();
            } catch (ExecutionException e) {
                if (pipes != null) {
                    pipes.abandon();
                }
                throw new IsolationException("cannot start the job: " + e.getCause().getMessage(), e.getCause());
            } catch (InterruptedException | RuntimeException e) {
                if (pipes != null) { // the start may still run: its descriptors go after it (one starter thread)
                    JobPipes left = pipes;
                    try {
                        starter.execute(left::abandon);
                    } catch (RejectedExecutionException closed) {
                        left.abandon(); // the starter is shut down: no start runs any more
                    }
                }
                throw e;
            }
            if (pipes != null) {
                pipes.started();
            }
            writeEnvironment(p, spec.env());
            LOG.info("job {} on allocation {} started as {} (uid {}) in {}: pid {}", jobId, allocation.id(),
                    spec.user(), spec.uid(), cgroup, p.pid());
            return new LaunchedJob(this, allocation, cgroup, relative(cgroup), fence, p,
                    pipes != null ? pipes.stdout() : p.getInputStream(),
                    pipes != null ? pipes.stderr() : p.getErrorStream());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            undo(cgroup, fence);
            throw new IsolationException("interrupted while starting the job");
        } catch (RuntimeException e) {
            undo(cgroup, fence);
            throw e;
        }
    }

    private void undo(Path cgroup, Fence fence) {
        String left = CgroupProcesses.endAndRemove(cgroup, relative(cgroup));
        if (fence != null && left.isEmpty()) {
            fence.revoke();
        }
    }

    /** Writes the environment to the user's shell on its stdin, from its own thread (it may exceed a pipe's size). */
    private static void writeEnvironment(Process p, Map<String, String> env) {
        byte[] script = exports(env).getBytes(StandardCharsets.UTF_8);
        Thread t = new Thread(() -> {
            try (OutputStream out = p.getOutputStream()) {
                out.write(script);
            } catch (IOException e) {
                LOG.debug("the job's shell did not read its environment (it ended first): {}", e.toString());
            }
        }, "gpusched-job-env");
        t.setDaemon(true);
        t.start();
    }

    /** @return the environment as {@code export NAME='value'} lines a POSIX shell evaluates without expanding */
    static String exports(Map<String, String> env) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, String> e : env.entrySet()) {
            if (SHELL_MANAGED.contains(e.getKey())) {
                continue;
            }
            sb.append("export ").append(e.getKey()).append("='").append(e.getValue().replace("'", "'\\''"))
                    .append("'\n");
        }
        return sb.toString();
    }

    /** Variables a POSIX shell manages itself (read-only in bash's sh mode): not exported. */
    static final List<String> SHELL_MANAGED = List.of("PPID", "UID", "EUID", "SHELLOPTS", "BASHOPTS", "BASH_VERSINFO",
            "PWD", "OLDPWD");

    /**
     * Ends and removes job cgroups under the parent that a previous run left (its service was killed): every
     * {@code job-*} directory whose job id {@code keep} does not accept.
     *
     * @param keep the job ids (from {@code job-<id>}) to leave alone
     * @return what was ended, and anything that could not be
     */
    public List<String> endLeftovers(Predicate<String> keep) {
        List<String> out = new ArrayList<>();
        if (!Files.isDirectory(parent)) {
            return out;
        }
        List<Path> dirs;
        try (var s = Files.list(parent)) {
            dirs = s.filter(Files::isDirectory).filter(d -> JOB_DIR.matcher(d.getFileName().toString()).matches())
                    .toList();
        } catch (IOException e) {
            out.add("cannot list " + parent + ": " + e.getMessage());
            return out;
        }
        for (Path d : dirs) {
            String id = d.getFileName().toString().substring(4);
            if (keep.test(id)) {
                continue;
            }
            List<Long> pids = CgroupProcesses.pids(d);
            String left = CgroupProcesses.endAndRemove(d, relative(d));
            out.add(left.isEmpty() ? "ended " + d + " (" + pids.size() + " process(es))" : left);
        }
        return out;
    }

    /** Stops the starting thread (a job it started that is still running gets its parent-death signal). */
    @Override
    public void close() {
        starter.shutdownNow();
    }

    /** Builds a {@link JobLauncher}. */
    public static final class Builder {
        private CgroupDeviceIsolator isolator;
        private Path parent;
        private Path setpriv = Path.of("/usr/bin/setpriv");
        private String jobGroup;

        private Builder() {
        }

        /**
         * @param v a group every job gets besides its user's own ({@code gpu.service.job_group}): with the driver's
         *          {@code NVreg_DeviceFileMode=0660} and this group's gid as {@code NVreg_DeviceFileGID}, only jobs
         *          open the GPUs
         * @return this
         */
        public Builder jobGroup(String v) {
            jobGroup = Objects.requireNonNull(v, "jobGroup");
            return this;
        }

        /** @param v the isolator that fences jobs (required) @return this */
        public Builder isolator(CgroupDeviceIsolator v) {
            isolator = Objects.requireNonNull(v, "isolator");
            return this;
        }

        /**
         * @param v where job cgroups are made (default {@value #DEFAULT_PARENT_NAME} at the root of cgroup2, else of
         *          the v1 devices hierarchy); made when absent
         * @return this
         */
        public Builder cgroupParent(Path v) {
            parent = Objects.requireNonNull(v, "cgroupParent");
            return this;
        }

        /** @param v util-linux {@code setpriv} (default {@code /usr/bin/setpriv}) @return this */
        public Builder setpriv(Path v) {
            setpriv = Objects.requireNonNull(v, "setpriv");
            return this;
        }

        /**
         * @return the launcher
         * @throws IsolationException when no hierarchy can hold jobs, the parent is not inside one, or setpriv is
         *                            missing
         */
        public JobLauncher build() {
            if (isolator == null) {
                throw new IllegalStateException("a JobLauncher needs an isolator: builder().isolator(...)");
            }
            return new JobLauncher(this);
        }
    }
}
