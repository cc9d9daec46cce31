package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.LocalOptions;
import io.gpusched.client.JobExit;
import io.gpusched.client.JobListener;
import io.gpusched.client.JobSpec;
import io.gpusched.client.JobView;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.ExitCode;
import io.gpusched.core.host.JobCgroups;
import io.gpusched.core.internal.Printable;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * {@code gpusched run} on a local ledger (no node service): allocate in this process, fence a cgroup, start the
 * command with its GPU environment, release when it exits, however it exits ({@link JobRun}). The job runs as this
 * process's user; its standard streams are this process's own, or piped to the listener.
 */
public final class LocalRun {
    private LocalRun() {
    }

    /**
     * @param scheduler the node ledger's scheduler
     * @param devices   the node's devices (what the fence is planned against)
     * @param resolver  the CUDA environment resolver
     * @param options   --no-isolation, --cgroup-parent, and whether the job's streams are this process's
     * @param spec      the job
     * @param request   what to allocate (the spec's flags, parsed)
     * @param listener  told when it starts (and its output, when piped)
     * @param onStart   given the job's process once it runs (to pass signals on to it)
     * @param err       where notes for the person go (stale job cgroups cleaned, a release that failed)
     * @return how it ended
     * @throws CliException when isolation is unavailable (and not turned off), or the command cannot start (127)
     */
    public static JobExit run(GpuScheduler scheduler, List<GpuDevice> devices, CudaEnvironmentResolver resolver,
            LocalOptions options, JobSpec spec, GpuRequest request, JobListener listener, Consumer<Process> onStart,
            PrintStream err) throws InterruptedException {
        CudaRequirement req = spec.cuda().map(CudaRequirement::parse).orElse(CudaRequirement.NONE);
        List<String> command = spec.argv();
        CgroupDeviceIsolator isolator = CgroupDeviceIsolator.detect(devices);
        if (!options.noIsolation() && !isolator.isAvailable()) {
            throw new CliException("isolation is off: " + isolator.unavailabilityCause().get()
                    + "; run with --no-isolation to run the job unfenced");
        }
        if (options.cgroupParent().isPresent() && !options.noIsolation()) {
            RunCommand.checkCgroupParent(options.cgroupParent().get(), isolator);
        }
        List<Path> madeParents = new ArrayList<>();
        Path parent = options.noIsolation() ? null : options.cgroupParent().orElseGet(() -> isolator.v2Root()
                .or(isolator::v1Root).orElseThrow().resolve("gpusched"));
        if (parent != null) {
            // job cgroups of runs killed before they recorded theirs (their allocation is no longer live)
            for (String problem : JobCgroups.cleanStale(parent, scheduler)) {
                err.println("gpusched: note: " + Printable.escape(problem));
            }
        }
        // bound to this process, which starts the job, waits for it and releases on its exit: if this process
        // dies (kill -9), the kernel kills the job (see childArgv) and the ledger's next transaction reclaims
        GpuRequest held = request.withHolder(HolderProcess.current());
        Allocation a = spec.maxWait().isPresent() ? scheduler.allocate(held, spec.maxWait().get())
                : scheduler.allocate(held);
        JobRun job = new JobRun(scheduler, a, err);
        Thread hook = new Thread(job::cleanUp, "gpusched-run-cleanup");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            CudaEnvironment env = resolver.resolve(a, req);
            Map<String, String> vars = env.applyTo(spec.env());
            String cgroupDir = "";
            if (parent != null) {
                RunCommand.makeParents(parent, madeParents, options.cgroupParent().isPresent());
                job.cgroup = Files.createDirectory(parent.resolve(JobCgroups.name(a.id())));
                job.fence = isolator.fence(job.cgroup, a);
                // recorded before the job starts: if this process is killed, whoever reclaims the allocation
                // ends the cgroup's processes (grandchildren too) before its GPUs go to anyone else
                scheduler.recordJobCgroup(a.id(), job.cgroup);
                cgroupDir = job.cgroup.toString();
            }
            if (!Files.isDirectory(Path.of(spec.cwd()))) {
                throw new CliException("cannot start " + command.get(0) + ": the working directory " + spec.cwd()
                        + " is not a directory (removed?)", ExitCode.COMMAND_NOT_RUNNABLE.code());
            }
            if (!RunCommand.executable(command.get(0), vars.get("PATH"))) {
                boolean found = RunCommand.found(command.get(0), vars.get("PATH"));
                throw new CliException("cannot start " + command.get(0) + ": " + (found
                        ? "not an executable file"
                                + (Files.isDirectory(Path.of(command.get(0))) ? " (a directory)" : "")
                        : "no such file") + (command.get(0).contains("/") ? "" : " on PATH"),
                        (found ? ExitCode.COMMAND_NOT_RUNNABLE : ExitCode.COMMAND_NOT_FOUND).code());
            }
            List<String> argv = RunCommand.childArgv(ProcessHandle.current().pid(), cgroupDir, command);
            String now = Instant.now().toString();
            listener.started(new JobView(a.id(), a.owner().orElse(System.getProperty("user.name")), null, "RUNNING",
                    a.id(), a.deviceIndices(), now, now, null, null, null, false, job.cgroup == null ? null
                            : job.cgroup.toString(),
                    command, spec.cwd(), null), AllocationView.of(a, Instant.now()));
            ProcessBuilder pb = new ProcessBuilder(argv).inheritIO().directory(Path.of(spec.cwd()).toFile());
            pb.environment().clear();
            pb.environment().putAll(vars);
            if (!options.inheritIo()) {
                pb.redirectOutput(ProcessBuilder.Redirect.PIPE).redirectErrorStream(true);
            }
            Process p;
            try {
                p = pb.start();
            } catch (IOException e) {
                // found or not, as the check above saw it: an error=2 may be the working directory's, not the command's
                throw new CliException("cannot start " + command.get(0) + ": " + e.getMessage(), (RunCommand.found(
                        command.get(0), vars.get("PATH")) ? ExitCode.COMMAND_NOT_RUNNABLE : ExitCode.COMMAND_NOT_FOUND)
                        .code());
            }
            job.process = p;
            if (job.cgroup == null) {
                recordJobProcess(scheduler, a, p);
            }
            onStart.accept(p);
            if (!options.inheritIo()) {
                pipe(p.getInputStream(), listener);
            }
            return new JobExit(p.waitFor(), Optional.empty());
        } catch (IOException e) {
            throw new CliException("cannot make the job's cgroup: " + e, 1);
        } finally {
            job.cleanUp();
            RunCommand.removeMadeParents(madeParents);
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // Ctrl-C or SIGTERM: the JVM is shutting down and the hook is running; the exit code is the job's
            }
        }
    }

    /**
     * An unfenced job has no cgroup to key a refused release on: its own process (pid and start time) is recorded, so
     * that {@code release} of its allocation is refused while it lives. A job that has already ended needs nothing;
     * an allocation released between the start and the record (someone else's release) ends the job: it must not
     * keep running on GPUs the next caller gets.
     */
    private static void recordJobProcess(GpuScheduler scheduler, Allocation a, Process p) {
        HolderProcess jp;
        try {
            jp = HolderProcess.of(p.pid());
        } catch (IllegalArgumentException ended) {
            return;
        }
        try {
            scheduler.recordJobProcess(a.id(), jp);
        } catch (GpuAllocationException e) {
            p.destroyForcibly();
            throw new CliException("allocation " + a.id() + " was released as its job started; the job was ended: "
                    + e.getMessage(), 1);
        }
    }

    private static void pipe(InputStream in, JobListener listener) throws IOException {
        byte[] b = new byte[8192];
        int n;
        while ((n = in.read(b)) > 0) {
            listener.stdout(Arrays.copyOf(b, n));
        }
    }
}
