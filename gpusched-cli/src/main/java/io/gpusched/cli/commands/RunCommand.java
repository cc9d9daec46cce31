package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.JsonViews;
import io.gpusched.cli.LocalOptions;
import io.gpusched.client.JobExit;
import io.gpusched.client.JobListener;
import io.gpusched.client.JobSpec;
import io.gpusched.client.JobView;
import io.gpusched.client.NodeClient;
import io.gpusched.core.AllocationView;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Json;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code gpusched run}: through the node service when one answers (the service allocates, fences and starts the job as
 * the caller, and streams its output back), else on the local ledger ({@link LocalRun}). Either way the exit code is
 * the job's, and the job's GPUs are released however it ends. Signals: before the job starts, Ctrl-C or SIGTERM ends
 * the command (a queued request is dropped); once it runs, they are passed on to the job (through the service, a
 * signal request; a local job gets the terminal's Ctrl-C itself), a second Ctrl-C sends TERM and a third KILL.
 */
@Command(name = "run", description = "Allocate, fence a cgroup, start the command with its GPU environment,"
        + " release when it exits. The exit code is the command's.")
public final class RunCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @Mixin
    RequestFlags flags = new RequestFlags();

    @Option(names = "--strategy", description = "packing, spreading, topology, topology-remaining or thermal"
            + " (a local ledger only)")
    String strategy;

    @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement (>=12.1, 12.4, 12)")
    String cuda;

    @Option(names = "--wait", paramLabel = "DURATION", description = "when the GPUs are busy, wait up to this long"
            + " (10m, 2h) in the node's queue instead of being refused at once")
    String wait;

    @Option(names = "--detach", description = "start the job with no client attached (through the node service):"
            + " its output goes to a file you own, read with gpusched logs ID")
    boolean detach;

    @Option(names = "--no-isolation", description = "run without a cgroup fence (when isolation is unavailable; a"
            + " local ledger only)")
    boolean noIsolation;

    @Option(names = "--cgroup-parent", paramLabel = "DIR", description = "parent cgroup for jobs (default: a"
            + " gpusched cgroup at the root of cgroup2, else of the v1 devices hierarchy; a local ledger only)")
    Path cgroupParent;

    @Parameters(arity = "1..*", paramLabel = "COMMAND", description = "the command, after --")
    List<String> command;

    @Override
    public Integer call() throws Exception {
        RequestFlags f = flags == null ? new RequestFlags() : flags;
        f.request(); // refuses bad flags here, before anything is asked of the node
        if (cuda != null) {
            CudaRequirement.parse(cuda);
        }
        Optional<Duration> maxWait = Optional.ofNullable(wait).map(w -> {
            try {
                return Durations.parse(w);
            } catch (IllegalArgumentException e) {
                throw new CliException("--wait: " + e.getMessage());
            }
        });
        JobSpec spec = new JobSpec(f.flags(), Optional.ofNullable(cuda), command, root.environment(),
                startDirectory(), maxWait);
        LocalOptions local = new LocalOptions(Optional.ofNullable(strategy), noIsolation,
                Optional.ofNullable(cgroupParent), root.out() == System.out);
        try (NodeClient n = root.client(local)) {
            if (detach) {
                JobView j = n.submit(spec);
                if (root.json()) {
                    root.out().println(Printable.escapeJson(Json.pretty(JsonViews.job(j))));
                } else {
                    root.out().println("started job " + j.id() + (j.devices().isEmpty() ? "" : ": GPUs "
                            + j.devices()) + " (" + j.state() + "); output: gpusched logs " + j.id()
                            + "; cancel: gpusched cancel " + j.id());
                }
                return 0;
            }
            if (noIsolation) {
                root.err().println("gpusched: isolation is off (--no-isolation): the job can reach every GPU"
                        + " of this host");
            }
            try (SignalRelay relay = SignalRelay.install(n, root.err())) {
                JobExit exit = n.run(spec, new JobListener() {
                    @Override
                    public void queued(int position) {
                        root.err().println("gpusched: waiting for GPUs, position " + position + " in the node's"
                                + " queue");
                    }

                    @Override
                    public void started(JobView job, AllocationView a) {
                        relay.started(job.id());
                        root.err().println("gpusched: " + Printable.escape(a.id()) + " GPUs " + a.devices()
                                + (job.cgroup() == null ? "" : " fenced in " + Printable.escape(job.cgroup())));
                    }

                    @Override
                    public void stdout(byte[] data) {
                        root.out().write(data, 0, data.length);
                        root.out().flush();
                    }

                    @Override
                    public void stderr(byte[] data) {
                        root.err().write(data, 0, data.length);
                        root.err().flush();
                    }
                });
                return exit.code();
            }
        }
    }

    /**
     * Refuses a {@code --cgroup-parent} before anything is created: it must be an absolute path without {@code .} or
     * {@code ..} components, inside the cgroup2 mount or the v1 devices hierarchy this host fences with, and the part
     * of it that exists must hold no symbolic link (the job's cgroup would land elsewhere).
     *
     * @throws CliException naming the path and what would be valid
     */
    static void checkCgroupParent(Path parent, CgroupDeviceIsolator isolator) {
        List<Path> roots = new ArrayList<>();
        isolator.v2Root().ifPresent(roots::add);
        isolator.v1Root().ifPresent(roots::add);
        String valid = "; expected an absolute path inside " + (roots.isEmpty() ? "a cgroup hierarchy"
                : roots.stream().map(Path::toString).toList()) + ", such as "
                + (roots.isEmpty() ? "/sys/fs/cgroup"
                        : roots.get(0))
                + "/gpusched";
        String shown = Printable.escape(parent.toString());
        if (!parent.isAbsolute()) {
            throw new CliException("--cgroup-parent " + shown + " is a relative path" + valid);
        }
        for (Path part : parent) {
            if (part.toString().equals("..") || part.toString().equals(".")) {
                throw new CliException("--cgroup-parent " + shown + " holds a \"" + part + "\" component" + valid);
            }
        }
        Path root = roots.stream().filter(parent::startsWith).findFirst().orElseThrow(() -> new CliException(
                "--cgroup-parent " + shown + " is not inside a cgroup hierarchy gpusched fences with" + valid));
        for (Path p = parent; p != null && p.startsWith(root) && !p.equals(root); p = p.getParent()) {
            if (Files.isSymbolicLink(p)) {
                throw new CliException("--cgroup-parent " + shown + ": " + Printable.escape(p.toString())
                        + " is a symbolic link" + valid);
            }
            if (Files.exists(p, LinkOption.NOFOLLOW_LINKS) && !Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                throw new CliException("--cgroup-parent " + shown + ": " + Printable.escape(p.toString())
                        + " is not a cgroup (not a directory)" + valid);
            }
        }
    }

    /**
     * Creates the parent cgroup and the ones above it that are missing; with {@code given} (a {@code --cgroup-parent}),
     * remembers each one made, deepest last, so the run removes them again.
     */
    static void makeParents(Path parent, List<Path> made, boolean given) throws IOException {
        List<Path> missing = new ArrayList<>();
        for (Path p = parent; p != null && !Files.exists(p, LinkOption.NOFOLLOW_LINKS); p = p.getParent()) {
            missing.add(0, p);
        }
        for (Path p : missing) {
            try {
                Files.createDirectory(p);
                if (given) {
                    made.add(p);
                }
            } catch (FileAlreadyExistsException another) {
                // another run made it meanwhile: it is theirs to keep
            }
        }
    }

    /** Removes the {@code --cgroup-parent} cgroups this run made, deepest first, when no other job is inside. */
    static void removeMadeParents(List<Path> made) {
        for (int i = made.size() - 1; i >= 0; i--) {
            try {
                Files.delete(made.get(i));
            } catch (IOException inUse) {
                return; // another run's job is inside (or it is already gone): leave it and those above it
            }
        }
    }

    /** setpriv (util-linux), which sets the parent-death signal before it executes the job */
    private static final Optional<Path> SETPRIV = Stream.of("/usr/bin/setpriv", "/bin/setpriv")
            .map(Path::of).filter(Files::isExecutable).findFirst();

    /**
     * The job's argv. The allocation is bound to this process: if it dies (even by kill -9) the ledger reclaims the
     * GPUs, so the job must die with it. The job is started through {@code setpriv --pdeathsig KILL}, so the kernel
     * sends it SIGKILL when this process exits; a shell then checks that its parent is still this process (closing
     * the window in which this process died before the death signal was set), joins the job's cgroup when there is
     * one, and executes the command (the death signal survives exec).
     *
     * @param parentPid this process's pid
     * @param cgroupDir the job's cgroup directory, or empty for none
     * @param command the command
     * @return the argv to start
     * @throws CliException if setpriv is missing (the job could outlive this process and its allocation)
     */
    static List<String> childArgv(long parentPid, String cgroupDir, List<String> command) {
        List<String> argv = new ArrayList<>();
        argv.add(SETPRIV.orElseThrow(() -> new CliException("cannot start the job: setpriv (util-linux) is missing;"
                + " without it the job would outlive a killed gpusched run and keep GPUs the ledger hands out"
                + " again")).toString());
        argv.addAll(List.of("--pdeathsig", "KILL", "--", "/bin/sh", "-c",
                "[ \"$PPID\" = \"$0\" ] || exit 137; if [ -n \"$1\" ]; then echo $$ > \"$1/cgroup.procs\" || exit"
                        + " 1; fi;"
                        + " shift; exec \"$@\"",
                Long.toString(parentPid), cgroupDir));
        argv.addAll(command);
        return argv;
    }

    /**
     * @return the directory this run was started in, the job's working directory
     * @throws CliException (126) when the JVM lost it: HotSpot's perf-data set-up ({@code -XX:+UsePerfData}, the
     *     default) changes into {@code <tmpdir>/hsperfdata_<user>} and returns through a descriptor of "." that it
     *     cannot open in a directory its user may enter but not list, so {@code user.dir} then names that directory
     */
    static String startDirectory() {
        String dir = System.getProperty("user.dir");
        Path perfData = Path.of(System.getProperty("java.io.tmpdir"), "hsperfdata_" + System.getProperty("user.name"));
        if (Path.of(dir).equals(perfData)) {
            throw new CliException("cannot tell the directory gpusched run was started in: the JVM's start left it in "
                    + perfData + " (it does so when started in a directory it may enter but not list); start it from"
                    + " a directory you can list, or with java -XX:-UsePerfData (as the gpusched launchers do)",
                    ExitCode.COMMAND_NOT_RUNNABLE.code());
        }
        return dir;
    }

    /**
     * @return whether {@code cmd} names something that exists (as a path, or on {@code path}): a file that is not
     *     executable or a directory is found but cannot be run (a shell's 126), nothing at all is not found (127)
     */
    static boolean found(String cmd, String path) {
        if (cmd.contains("/")) {
            return Files.exists(Path.of(cmd));
        }
        for (String d : (path == null ? "/usr/bin:/bin" : path).split(":", -1)) {
            if (Files.exists(Path.of(d.isEmpty() ? "." : d, cmd))) {
                return true;
            }
        }
        return false;
    }

    /** @return whether exec would run {@code cmd}: an executable regular file (a path, or a name on PATH) */
    static boolean executable(String cmd, String path) {
        if (cmd.contains("/")) {
            return Files.isRegularFile(Path.of(cmd)) && Files.isExecutable(Path.of(cmd));
        }
        for (String d : (path == null ? "/usr/bin:/bin" : path).split(":", -1)) {
            Path p = Path.of(d.isEmpty() ? "." : d, cmd);
            if (Files.isRegularFile(p) && Files.isExecutable(p)) {
                return true;
            }
        }
        return false;
    }
}
