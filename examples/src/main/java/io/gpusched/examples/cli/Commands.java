package io.gpusched.examples.cli;

import io.gpusched.core.Allocation;
import io.gpusched.core.DeviceState;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuMetrics;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.NvidiaDriver;
import io.gpusched.core.internal.Durations;
import io.gpusched.core.internal.Json;
import io.gpusched.cuda.Compatibility;
import io.gpusched.cuda.CompatibilityTable;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaInstallation;
import io.gpusched.cuda.CudaInstallations;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.cuda.CudaSearch;
import io.gpusched.cuda.DriverVersion;
import io.gpusched.examples.GpuschedCommand;
import io.gpusched.examples.Tables;
import io.gpusched.examples.WorkflowPlanner;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.isolation.Fence;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** The subcommands of {@code gpusched}. */
public final class Commands {
    private Commands() {
    }

    /** {@code gpusched demo}: the README's first command. */
    @Command(name = "demo", description = "Detect the node (or simulate one), show it, allocate and release.")
    public static final class Demo implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Override
        public Integer call() {
            return io.gpusched.examples.Demo.run(root.out(), root.simulate());
        }
    }

    /** {@code gpusched list}. */
    @Command(name = "list", description = "The node's GPUs: memory, utilization, temperature, power, health, holder.")
    public static final class ListGpus implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Override
        public Integer call() {
            try (Node n = root.open(Optional.empty())) {
                if (root.json()) {
                    root.out().println(Json.pretty(n.scheduler().status().devices()));
                    return 0;
                }
                root.out().println("Backend " + n.inventory().backend() + ", " + n.inventory().devices().size()
                        + " GPUs");
                root.out().print(table(n.scheduler().devices()));
            }
            return 0;
        }

        static String table(List<DeviceState> devices) {
            List<String[]> rows = new ArrayList<>();
            rows.add(new String[] {"IDX", "NAME", "MEMORY USED/TOTAL", "UTIL", "TEMP", "POWER", "HEALTH", "HELD BY"});
            for (DeviceState d : devices) {
                Optional<GpuMetrics> m = d.metrics();
                rows.add(new String[] {String.valueOf(d.index()), d.device().name(),
                    m.flatMap(GpuMetrics::memoryUsed).map(x -> x.toHumanString()).orElse("?") + " / "
                            + d.device().memory().toHumanString(),
                    m.filter(x -> x.utilizationPercent().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f%%",
                            x.utilizationPercent().getAsDouble())).orElse("-"),
                    m.filter(x -> x.temperatureCelsius().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f C",
                            x.temperatureCelsius().getAsDouble())).orElse("-"),
                    m.filter(x -> x.powerWatts().isPresent()).map(x -> String.format(Locale.ROOT, "%.0f W",
                            x.powerWatts().getAsDouble())).orElse("-"),
                    d.health() + (d.pool() == DeviceState.Pool.IN_POOL ? "" : " " + d.pool()),
                    d.exclusiveHolder().orElse(d.isShared() ? "shared x" + d.sharedHolders() : "-")});
            }
            return Tables.format(rows);
        }
    }

    /** {@code gpusched topo}. */
    @Command(name = "topo", description = "The link matrix (like nvidia-smi topo -m) and NUMA nodes.")
    public static final class Topo implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Override
        public Integer call() {
            try (Node n = root.open(Optional.empty())) {
                if (root.json()) {
                    root.out().println(Json.pretty(n.inventory().topology().links()));
                } else {
                    root.out().print(Tables.topology(n.inventory().devices(), n.inventory().topology()));
                }
            }
            return 0;
        }
    }

    /** {@code gpusched watch}. */
    @Command(name = "watch", description = "A live view of the GPUs; Ctrl-C to stop.")
    public static final class Watch implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Option(names = "--interval", defaultValue = "1s", description = "refresh interval (500ms, 2s, ...)")
        String interval;

        @Option(names = "--count", defaultValue = "0", description = "frames to draw; 0: until Ctrl-C")
        int count;

        @Option(names = "--no-ansi", description = "plain output, one frame after another (for pipes)")
        boolean noAnsi;

        @Override
        public Integer call() throws InterruptedException {
            Duration every = Durations.parse(interval);
            boolean ansi = !noAnsi && System.console() != null;
            try (Node n = root.open(Optional.empty())) {
                Thread restore = new Thread(() -> root.out().print(ansi ? "\u001b[0m\n" : ""));
                Runtime.getRuntime().addShutdownHook(restore);
                Map<Integer, String> previous = new HashMap<>();
                for (int frame = 0; count == 0 || frame < count; frame++) {
                    n.scheduler().updateMetrics(n.inventory().sample());
                    List<DeviceState> devices = n.scheduler().devices();
                    root.out().print(WatchView.render("gpusched watch - " + n.inventory().backend() + " - every "
                            + interval + " (Ctrl-C to stop)", devices, previous, ansi));
                    root.out().flush();
                    previous.clear();
                    for (DeviceState d : devices) {
                        previous.put(d.index(), d.health() + (d.pool() == DeviceState.Pool.IN_POOL ? "" : " "
                                + d.pool()));
                    }
                    if (count == 0 || frame < count - 1) {
                        Thread.sleep(every.toMillis());
                    }
                }
                Runtime.getRuntime().removeShutdownHook(restore);
            }
            return 0;
        }
    }

    /** The request flags shared by allocate and run; turned into {@link GpuRequests#fromCliFlags} input. */
    public static final class RequestFlags {
        @Option(names = "--gpu", paramLabel = "N", description = "GPU count") Integer gpu;
        @Option(names = "--gpu-memory", paramLabel = "SIZE", description = "minimum memory per GPU (8GB)") String memory;
        @Option(names = "--min-cc", paramLabel = "X.Y", description = "minimum compute capability") String minCc;
        @Option(names = "--vendor", description = "nvidia or amd") String vendor;
        @Option(names = "--model", paramLabel = "GLOB", description = "GPU name glob (*A100*)") String model;
        @Option(names = "--devices", paramLabel = "I,J", description = "explicit GPU indices") String devices;
        @Option(names = "--target", paramLabel = "HOST::I,J", description = "host and GPU indices (node1::0,2)")
        String target;
        @Option(names = "--shared", paramLabel = "SIZE", description = "share GPUs, reserving SIZE on each") String shared;
        @Option(names = "--owner", description = "who asks (default: $USER)") String owner;
        @Option(names = "--job", description = "job id") String job;
        @Option(names = "--label", paramLabel = "K=V", description = "label, repeatable") List<String> labels;
        @Option(names = "--lease", paramLabel = "DURATION", description = "allocation expires after this (2h)")
        String lease;

        GpuRequest request() {
            List<String> f = new ArrayList<>();
            add(f, "--gpu", gpu == null ? null : String.valueOf(gpu));
            add(f, "--gpu-memory", memory);
            add(f, "--min-cc", minCc);
            add(f, "--vendor", vendor);
            add(f, "--model", model);
            add(f, "--devices", devices);
            add(f, "--target", target);
            add(f, "--shared", shared);
            add(f, "--owner", owner != null ? owner : System.getProperty("user.name"));
            add(f, "--job", job);
            if (labels != null) {
                labels.forEach(l -> add(f, "--label", l));
            }
            add(f, "--lease", lease);
            return GpuRequests.fromCliFlags(f);
        }

        private static void add(List<String> f, String flag, String value) {
            if (value != null) {
                f.add(flag + "=" + value);
            }
        }
    }

    static CudaEnvironmentResolver resolver(Node n) {
        return CudaEnvironmentResolver.builder()
                .search(CudaSearch.host(n.config().cudaPaths())).build();
    }

    static void printEnvironment(PrintStream out, CudaEnvironment env) {
        env.variables().forEach((k, v) -> out.println("  " + k + "=" + v));
        env.pathPrepends().forEach((k, v) -> out.println("  " + k + "=" + String.join(":", v) + ":$" + k));
        env.installation().ifPresent(i -> out.println("  (CUDA " + i.version().map(Object::toString).orElse("?")
                + " at " + i.root() + env.compatibility().map(c -> ", " + c.verdict()).orElse("") + ")"));
        env.notes().forEach(note -> out.println("  note: " + note));
    }

    /** {@code gpusched allocate}. */
    @Command(name = "allocate", description = "Allocate GPUs; the allocation persists until gpusched release.")
    public static final class Allocate implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @ArgGroup(exclusive = false)
        RequestFlags flags = new RequestFlags();

        @Option(names = "--strategy", description = "packing, spreading, topology or thermal") String strategy;

        @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement for the printed environment"
                + " (>=12.1, 12.4, 12)") String cuda;

        @Override
        public Integer call() {
            GpuRequest request = (flags == null ? new RequestFlags() : flags).request();
            CudaRequirement req = cuda == null ? CudaRequirement.NONE : CudaRequirement.parse(cuda);
            try (Node n = root.open(Optional.ofNullable(strategy))) {
                Allocation a = n.scheduler().allocate(request);
                CudaEnvironment env;
                try {
                    env = resolver(n).resolve(a, req);
                } catch (RuntimeException e) {
                    n.scheduler().release(a.id());
                    throw e;
                }
                if (root.json()) {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("id", a.id());
                    m.put("devices", a.deviceIndices());
                    m.put("uuids", a.deviceUuids());
                    m.put("sharing", a.sharing().name());
                    m.put("expiresAt", a.expiresAt().map(Object::toString).orElse(null));
                    m.put("environment", env.variables());
                    root.out().println(Json.pretty(m));
                } else {
                    root.out().println("allocated " + a.id() + ": GPUs " + a.deviceIndices() + " " + a.sharing()
                            + a.sharedMemory().map(x -> " (" + x.toHumanString() + " each)").orElse("")
                            + a.expiresAt().map(x -> ", lease until " + x).orElse(""));
                    root.out().println("environment:");
                    printEnvironment(root.out(), env);
                    root.out().println("release with: gpusched " + (root.simulate().isPresent() ? "--simulate "
                            + root.simulate().get() + " " : "") + "release " + a.id());
                }
            }
            return 0;
        }
    }

    /** {@code gpusched release}. */
    @Command(name = "release", description = "Release an allocation.")
    public static final class Release implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Parameters(paramLabel = "ID", description = "allocation id")
        String id;

        @Override
        public Integer call() {
            try (Node n = root.open(Optional.empty())) {
                boolean released = n.scheduler().release(id);
                root.out().println(released ? "released " + id : id + " was already released");
            }
            return 0;
        }
    }

    /** {@code gpusched status}. */
    @Command(name = "status", description = "Who holds what, and free memory.")
    public static final class Status implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Override
        public Integer call() {
            try (Node n = root.open(Optional.empty())) {
                GpuScheduler s = n.scheduler();
                if (root.json()) {
                    root.out().println(s.statusJson());
                    return 0;
                }
                var st = s.status();
                root.out().println("Backend " + st.backend() + ", strategy " + st.strategy() + ", "
                        + st.allocations().size() + " allocations (journal " + n.journal() + ")");
                root.out().print(ListGpus.table(s.devices()));
                for (var h : st.allocations()) {
                    root.out().println(h.id() + "  GPUs " + h.deviceIndices() + "  " + h.sharing()
                            + (h.owner() == null ? "" : "  owner " + h.owner())
                            + (h.jobId() == null ? "" : "  job " + h.jobId())
                            + (h.expiresAt() == null ? "" : "  lease until " + h.expiresAt()));
                }
                st.notes().forEach(note -> root.out().println("note: " + note));
            }
            return 0;
        }
    }

    /** {@code gpusched run}. */
    @Command(name = "run", description = "Allocate, fence a cgroup, start the command with its GPU environment,"
            + " release when it exits. The exit code is the command's.")
    public static final class Run implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @ArgGroup(exclusive = false)
        RequestFlags flags = new RequestFlags();

        @Option(names = "--strategy", description = "packing, spreading, topology or thermal") String strategy;

        @Option(names = "--cuda", paramLabel = "REQ", description = "CUDA requirement (>=12.1, 12.4, 12)") String cuda;

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
                Allocation a = n.scheduler().allocate(request);
                JobRun job = new JobRun(n.scheduler(), a);
                Thread hook = new Thread(job::cleanUp, "gpusched-run-cleanup");
                Runtime.getRuntime().addShutdownHook(hook);
                try {
                    CudaEnvironment env = resolver(n).resolve(a, req);
                    Map<String, String> vars = env.applyTo(System.getenv());
                    List<String> argv = new ArrayList<>();
                    if (noIsolation) {
                        root.err().println("gpusched: isolation is off (--no-isolation): the job can reach every GPU"
                                + " of this host");
                        argv.addAll(command);
                    } else {
                        Path parent = cgroupParent != null ? cgroupParent : isolator.v2Root().or(isolator::v1Root)
                                .orElseThrow().resolve("gpusched");
                        Files.createDirectories(parent);
                        job.cgroup = Files.createDirectory(parent.resolve("job-" + a.id()));
                        job.fence = isolator.fence(job.cgroup, a);
                        argv.addAll(List.of("/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"",
                                job.cgroup.toString()));
                        argv.addAll(command);
                    }
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
                    Runtime.getRuntime().removeShutdownHook(hook);
                }
            }
        }
    }

    /** Everything a run made, undone once whatever way it ends. */
    static final class JobRun {
        final GpuScheduler scheduler;
        final Allocation allocation;
        volatile Process process;
        volatile Path cgroup;
        volatile Fence fence;
        private boolean cleaned;

        JobRun(GpuScheduler scheduler, Allocation allocation) {
            this.scheduler = scheduler;
            this.allocation = allocation;
        }

        synchronized void cleanUp() {
            if (cleaned) {
                return;
            }
            cleaned = true;
            Process p = process;
            if (p != null && p.isAlive()) {
                p.destroy();
            }
            if (cgroup != null) {
                killLeftovers(cgroup);
            }
            if (fence != null) {
                fence.revoke();
            }
            if (cgroup != null) {
                for (int i = 0; i < 100 && Files.exists(cgroup); i++) {
                    try {
                        Files.delete(cgroup);
                    } catch (IOException busy) {
                        killLeftovers(cgroup);
                        try {
                            Thread.sleep(20);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            break;
                        }
                    }
                }
            }
            scheduler.release(allocation.id());
        }

        private static void killLeftovers(Path cgroup) {
            try {
                for (String pid : Files.readAllLines(cgroup.resolve("cgroup.procs"))) {
                    if (!pid.isBlank()) {
                        ProcessHandle.of(Long.parseLong(pid.trim())).ifPresent(ProcessHandle::destroyForcibly);
                    }
                }
            } catch (IOException | NumberFormatException ignored) {
                // the cgroup is gone or empty
            }
        }
    }

    /** {@code gpusched doctor}. */
    @Command(name = "doctor", description = "What works here, what does not, and what to do about it.")
    public static final class Doctor implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Override
        public Integer call() {
            PrintStream out = root.out();
            out.println("Inventory providers (highest priority first):");
            boolean any = false;
            for (GpuInventories.ProviderStatus p : GpuInventories.providers()) {
                any |= p.available();
                out.println("  " + (p.available() ? "[ok]  " : "[--]  ") + p.name() + " (priority " + p.priority()
                        + ")" + p.cause().map(c -> ": " + c).orElse(": available"));
                p.cause().flatMap(Doctor::advice).ifPresent(a -> out.println("        -> " + a));
            }
            if (!any) {
                out.println("  -> no backend works here; gpusched --simulate dgx1-v100 ... runs on a simulated node");
            }
            List<GpuDevice> devices = List.of();
            CgroupDeviceIsolator iso = CgroupDeviceIsolator.detect(devices);
            out.println("Isolation:");
            out.println("  cgroup v1 devices: " + iso.v1Root().map(Path::toString).orElse("not mounted"));
            out.println("  cgroup v2:         " + iso.v2Root().map(Path::toString).orElse("not mounted"));
            out.println("  " + iso.unavailabilityCause().map(c -> "[--]  unavailable: " + c + "\n        -> run as"
                    + " root on a host with a cgroup v1 devices hierarchy or cgroup2, or use gpusched run"
                    + " --no-isolation").orElse("[ok]  available (" + (iso.v2Root().isPresent() ? "v2 eBPF" : "v1")
                    + " by default)"));
            List<Path> extra = new ArrayList<>();
            root.config().map(io.gpusched.core.GpuConfig::load).ifPresent(c -> extra.addAll(c.cudaPaths()));
            CudaInstallations.Discovery d = CudaInstallations.discover(CudaSearch.host(extra));
            Optional<DriverVersion> driver = NvidiaDriver.loadedVersion(Path.of("/proc")).map(DriverVersion::parse);
            out.println("CUDA (driver " + driver.map(Object::toString).orElse("not loaded") + "):");
            if (d.installations().isEmpty()) {
                out.println("  none found in /usr/local/cuda*, /opt/cuda, /usr/lib/cuda, CUDA_HOME, CUDA_PATH"
                        + " -> install a toolkit or add its path to gpu.cuda_paths");
            }
            CompatibilityTable table = CompatibilityTable.builtIn();
            for (CudaInstallation i : d.installations()) {
                String verdict = i.version().map(v -> driver.map(dv -> {
                    Compatibility c = Compatibility.judge(table, v, dv, Optional.empty(), i.compatDir(), true);
                    return c.verdict() + ": " + c.message();
                }).orElse("no NVIDIA driver is loaded, so it cannot be checked")).orElse("version unknown");
                out.println("  " + i.root() + (i.aliases().isEmpty() ? "" : " (also " + i.aliases() + ")") + ": CUDA "
                        + i.version().map(Object::toString).orElse("?") + " from " + i.versionSource().map(Enum::name)
                        .orElse("?") + (i.hasRuntime() ? ", runtime" : "") + (i.nvcc().isPresent() ? ", nvcc" : ""));
                out.println("        " + verdict);
            }
            d.problems().forEach(p -> out.println("  problem: " + p));
            return 0;
        }

        static Optional<String> advice(String cause) {
            if (cause.contains("driver not loaded")) {
                return Optional.of("load the NVIDIA kernel module (nvidia-smi must work), or use --simulate");
            }
            if (cause.contains("library not found")) {
                return Optional.of("install the driver's user-space library, or point -Dgpusched.nvml.library at it");
            }
            if (cause.contains("amdgpu")) {
                return Optional.of("load amdgpu (modprobe amdgpu) on AMD hosts; ignore on NVIDIA hosts");
            }
            if (cause.contains("no permission")) {
                return Optional.of("run as a user allowed to open /dev/nvidiactl");
            }
            return Optional.empty();
        }
    }

    /** {@code gpusched plan}. */
    @Command(name = "plan", description = "Which GPUs each job of a workflow would get, in dependency order.")
    public static final class Plan implements Callable<Integer> {
        @ParentCommand
        GpuschedCommand root;

        @Parameters(paramLabel = "WORKFLOW", description = "workflow YAML with jobs: {name: {needs, resources}}")
        Path workflow;

        @Option(names = "--strategy", description = "packing, spreading, topology or thermal") String strategy;

        @Override
        public Integer call() throws IOException {
            if (!Files.isRegularFile(workflow)) {
                throw new CliException("workflow file " + workflow + " does not exist");
            }
            try (Node n = root.open(Optional.ofNullable(strategy))) {
                GpuScheduler scratch = GpuScheduler.builder().inventory(n.inventory()).config(n.config())
                        .auditLogging(false).maintenanceInterval(Duration.ZERO).build();
                for (Allocation held : n.scheduler().allocations()) {
                    scratch.allocate(GpuRequest.builder().deviceUuids(held.deviceUuids()).build());
                }
                List<WorkflowPlanner.Step> steps = WorkflowPlanner.plan(Files.readString(workflow),
                        workflow.toString(), scratch);
                if (root.json()) {
                    root.out().println(Json.pretty(steps.stream().map(s -> Map.of("stage", s.stage(), "job", s.job(),
                            "gpus", s.gpus(), "refusal", s.refusal().orElse(""))).toList()));
                    return 0;
                }
                List<String[]> rows = new ArrayList<>();
                rows.add(new String[] {"STAGE", "JOB", "ASKS", "GETS"});
                for (WorkflowPlanner.Step s : steps) {
                    rows.add(new String[] {String.valueOf(s.stage()), s.job(),
                        s.request().map(GpuRequest::describe).orElse("no GPU"),
                        s.request().isEmpty() ? "-" : s.refusal().map(r -> "refused: " + r)
                                .orElse("GPUs " + s.gpus())});
                }
                root.out().print(Tables.format(rows));
            }
            return 0;
        }
    }
}
