package io.gpusched.cli.commands;

import io.gpusched.cli.CliException;
import io.gpusched.cli.GpuschedCommand;
import io.gpusched.cli.Node;
import io.gpusched.cli.RunSampler;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.HolderProcess;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code gpusched run}. */
@Command(name = "run", description = "Allocate, fence a cgroup, start the command with its GPU environment,"
        + " release when it exits. The exit code is the command's.")
public final class RunCommand implements Callable<Integer> {
    @ParentCommand
    GpuschedCommand root;

    @ArgGroup(exclusive = false)
    RequestFlags flags = new RequestFlags();

    @Option(names = "--strategy", description = "packing, spreading, topology, topology-remaining or thermal")
    String strategy;

    @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement (>=12.1, 12.4, 12)")
    String cuda;

    @Option(names = "--no-isolation", description = "run without a cgroup fence (when isolation is unavailable)")
    boolean noIsolation;

    @Option(names = "--cgroup-parent", paramLabel = "DIR", description = "parent cgroup for jobs (default: a"
            + " gpusched cgroup at the root of cgroup2, else of the v1 devices hierarchy)")
    Path cgroupParent;

    @Parameters(arity = "1..*", paramLabel = "COMMAND", description = "the command, after --")
    List<String> command;

    @Override
    public Integer call() throws Exception {
        GpuRequest request = (flags == null ? new RequestFlags() : flags).request();
        CudaRequirement req = cuda == null ? CudaRequirement.NONE : CudaRequirement.parse(cuda);
        try (Node n = root.open(Optional.ofNullable(strategy))) {
            CgroupDeviceIsolator isolator = CgroupDeviceIsolator.detect(n.inventory().devices());
            if (!noIsolation && !isolator.isAvailable()) {
                throw new CliException("isolation is off: " + isolator.unavailabilityCause().get()
                        + "; run with --no-isolation to run the job unfenced");
            }
            // bound to this process, which starts the job, waits for it and releases on its exit: if this process
            // dies (kill -9), the kernel kills the job (see childArgv) and the ledger's next transaction reclaims
            Allocation a = n.scheduler().allocate(request.withHolder(HolderProcess.current()));
            RunSampler sampler = RunSampler.start(n, root.config()); // the node's sampler when no other runs
            JobRun job = new JobRun(n.scheduler(), a);
            Thread hook = new Thread(job::cleanUp, "gpusched-run-cleanup");
            Runtime.getRuntime().addShutdownHook(hook);
            try {
                CudaEnvironment env = CudaOutput.resolver(n).resolve(a, req);
                Map<String, String> vars = env.applyTo(System.getenv());
                String cgroupDir = "";
                if (noIsolation) {
                    root.err().println("gpusched: isolation is off (--no-isolation): the job can reach every GPU"
                            + " of this host");
                } else {
                    Path parent = cgroupParent != null ? cgroupParent : isolator.v2Root().or(isolator::v1Root)
                            .orElseThrow().resolve("gpusched");
                    Files.createDirectories(parent);
                    job.cgroup = Files.createDirectory(parent.resolve("job-" + a.id()));
                    job.fence = isolator.fence(job.cgroup, a);
                    cgroupDir = job.cgroup.toString();
                }
                if (!executable(command.get(0), vars.get("PATH"))) {
                    throw new CliException("cannot start " + command.get(0) + ": not an executable file"
                            + (command.get(0).contains("/") ? "" : " on PATH"), 127);
                }
                List<String> argv = childArgv(ProcessHandle.current().pid(), cgroupDir, command);
                root.err().println("gpusched: " + a.id() + " GPUs " + a.deviceIndices()
                        + (job.cgroup == null ? "" : " fenced in " + job.cgroup));
                ProcessBuilder pb = new ProcessBuilder(argv).inheritIO();
                pb.environment().clear();
                pb.environment().putAll(vars);
                if (root.out() != System.out) {
                    pb.redirectOutput(ProcessBuilder.Redirect.PIPE).redirectErrorStream(true);
                }
                Process p;
                try {
                    p = pb.start();
                } catch (IOException e) {
                    throw new CliException("cannot start " + command.get(0) + ": " + e.getMessage(), 127);
                }
                job.process = p;
                if (root.out() != System.out) {
                    p.getInputStream().transferTo(root.out());
                }
                return p.waitFor();
            } finally {
                job.cleanUp();
                sampler.close();
                Runtime.getRuntime().removeShutdownHook(hook);
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

    /** @return whether the shell's exec would find {@code cmd} (a path, or a name on {@code path}) */
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
