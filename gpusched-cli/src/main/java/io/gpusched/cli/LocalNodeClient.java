package io.gpusched.cli;

import com.sun.security.auth.module.UnixSystem;
import io.gpusched.cdi.CdiOptions;
import io.gpusched.cdi.ContainerDevices;
import io.gpusched.cli.commands.CudaOutput;
import io.gpusched.cli.commands.LocalRun;
import io.gpusched.client.AllocationEnvironment;
import io.gpusched.client.Identity;
import io.gpusched.client.JobExit;
import io.gpusched.client.JobListener;
import io.gpusched.client.JobSpec;
import io.gpusched.client.JobView;
import io.gpusched.client.NodeClient;
import io.gpusched.client.NodeInfo;
import io.gpusched.client.NodeSnapshot;
import io.gpusched.client.NodeStatus;
import io.gpusched.client.QueueEntry;
import io.gpusched.client.Topology;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuException;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuTopology;
import io.gpusched.core.SchedulerStatus;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.server.ConsoleServer;
import io.gpusched.server.TopologyGrid;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * The {@link NodeClient} of a command that is not served by the node service: the node ledger in this process
 * (gpu-core's scheduler over the state directory, as {@link Node} opens it), as gpusched did before the service. Used
 * by root when no service answers, and by anyone who passes {@code --state-dir} on purpose (or {@code --simulate}
 * without a service). Reads that need no scheduler ({@link #allocations()}, {@link #allocation}, {@link #environment})
 * take no lock and write nothing until something opens one. Jobs, logs and the queue are the service's: asked of this
 * client, they are refused, saying why this command is not served by the service.
 */
public final class LocalNodeClient implements NodeClient {
    private final Optional<String> simulate;
    private final Optional<Path> config;
    private final Optional<Path> stateDir;
    private final LocalOptions options;
    private final String why;
    private final PrintStream err;
    private Node node;
    private Path readFrom;
    private volatile Process running;
    private volatile String runningId;

    /**
     * @param simulate a simulated profile or node file; empty: detect
     * @param config   a gpusched.yaml
     * @param stateDir {@code --state-dir}; empty: the node's default
     * @param options  what only a local ledger follows
     * @param why      why this command uses a local ledger, for refusals ("--state-dir was given", ...)
     */
    public LocalNodeClient(Optional<String> simulate, Optional<Path> config, Optional<Path> stateDir,
            LocalOptions options, String why) {
        this(simulate, config, stateDir, options, why, System.err);
    }

    /**
     * @param simulate a simulated profile or node file; empty: detect
     * @param config   a gpusched.yaml
     * @param stateDir {@code --state-dir}; empty: the node's default
     * @param options  what only a local ledger follows
     * @param why      why this command uses a local ledger, for refusals ("--state-dir was given", ...)
     * @param err      where notes for the person go (a run's stale job cgroups cleaned, a release that failed)
     */
    public LocalNodeClient(Optional<String> simulate, Optional<Path> config, Optional<Path> stateDir,
            LocalOptions options, String why, PrintStream err) {
        this.simulate = simulate;
        this.config = config;
        this.stateDir = stateDir;
        this.options = options;
        this.why = why;
        this.err = err;
    }

    /** @return the open node, opened on first use (a scheduler over the node ledger) */
    synchronized Node opened() {
        if (node == null) {
            node = Node.open(simulate, config, stateDir, options.strategy(), Optional.empty());
        }
        return node;
    }

    private GpuScheduler scheduler() {
        return opened().scheduler();
    }

    @Override
    public NodeInfo node() {
        Node n = opened();
        SchedulerStatus st = n.scheduler().status();
        String backend = n.inventory().backend();
        return new NodeInfo(hostname(), backend, backend.startsWith("simulated:"), n.inventory().devices().size(),
                st.strategy(), ConsoleServer.version(), Optional.of(n.stateDirectory().toString()), st.enabled(),
                st.drainSupported(), st.notes());
    }

    private static String hostname() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return Optional.ofNullable(System.getenv("HOSTNAME")).orElse("localhost");
        }
    }

    @Override
    public List<DeviceView> devices() {
        GpuScheduler s = scheduler();
        return DeviceView.of(s.devices(), s.allocations(), Instant.now());
    }

    @Override
    public Topology topology() {
        Node n = opened();
        var devices = n.inventory().devices();
        GpuTopology t = n.inventory().topology();
        List<Integer> numa = new ArrayList<>();
        for (var d : devices) {
            numa.add(t.numaNode(d.index()).isPresent() ? t.numaNode(d.index()).getAsInt() : null);
        }
        return new Topology(devices.stream().map(d -> d.index()).toList(), TopologyGrid.matrix(devices, t), numa,
                "X self; NV#/XG# NVLink/XGMI with # links; PIX one PCIe switch; PXB several; PHB host bridge; NODE"
                        + " within a NUMA node; SYS across sockets");
    }

    @Override
    public AllocationView allocate(List<String> flags) {
        return AllocationView.of(scheduler().allocate(request(flags)), Instant.now());
    }

    @Override
    public AllocationView allocate(List<String> flags, Duration wait) throws InterruptedException {
        return AllocationView.of(scheduler().allocate(request(flags), wait), Instant.now());
    }

    /** @return the core's allocation of that id (for the command's own local work, e.g. a job's fence) */
    Optional<Allocation> coreAllocation(String id) {
        return scheduler().allocation(id);
    }

    /** @return the request in {@code flags}, owned by this process's user unless {@code --owner} names another */
    static GpuRequest request(List<String> flags) {
        List<String> f = new ArrayList<>(flags);
        if (f.stream().noneMatch(x -> x.startsWith("--owner=") || x.equals("--owner"))) {
            f.add("--owner=" + System.getProperty("user.name"));
        }
        return GpuRequests.fromCliFlags(f);
    }

    @Override
    public boolean release(String id) {
        return scheduler().release(id);
    }

    @Override
    public AllocationView renew(String id, Duration lease) {
        return AllocationView.of(scheduler().renew(id, lease), Instant.now());
    }

    @Override
    public List<AllocationView> allocations() {
        return AllocationView.of(live(), Instant.now());
    }

    private synchronized List<Allocation> live() {
        if (node != null) {
            return node.scheduler().allocations();
        }
        // read only (no lock, nothing written): a YARN container is never the NodeManager's user
        Node.Read read = Node.read(simulate, config, stateDir);
        readFrom = read.stateDirectory();
        return read.ledger().allocations();
    }

    @Override
    public Optional<AllocationView> allocation(String id) {
        return live().stream().filter(a -> a.id().equals(id)).findFirst().map(a -> AllocationView.of(a,
                Instant.now()));
    }

    @Override
    public NodeStatus status() {
        NodeInfo info = node();
        GpuScheduler s = scheduler();
        List<Allocation> live = s.allocations();
        Instant now = Instant.now();
        return new NodeStatus(info, now.toString(), DeviceView.of(s.devices(), live, now),
                AllocationView.of(live, now));
    }

    @Override
    public List<QueueEntry> queue() {
        throw serviceOnly("gpusched queue (the node service's fair queue)");
    }

    @Override
    public void watch(Duration interval, Predicate<NodeSnapshot> each) throws InterruptedException {
        Node n = opened();
        while (true) {
            n.scheduler().updateMetrics(n.inventory().sample());
            if (!each.test(new NodeSnapshot(devices()))) {
                return;
            }
            Thread.sleep(interval.toMillis());
        }
    }

    @Override
    public synchronized AllocationEnvironment environment(String allocationId, Optional<String> cuda) {
        CudaRequirement req = cuda.map(CudaRequirement::parse).orElse(CudaRequirement.NONE);
        Allocation a = live().stream().filter(x -> x.id().equals(allocationId)).findFirst().orElseThrow(
                () -> new GpuAllocationException(GpuAllocationException.Reason.UNKNOWN_ALLOCATION, "no allocation \""
                        + allocationId + "\" is live in the node ledger"));
        CudaEnvironment env = resolver().resolve(a, req);
        List<String> docker = List.of();
        List<String> cdi = List.of();
        Optional<String> problem;
        if (node == null) {
            problem = Optional.of("container flags are planned against the node's devices, which a read of the"
                    + " ledger alone does not open");
        } else {
            try {
                ContainerDevices c = ContainerDevices.of(a, node.inventory().devices(), CdiOptions.defaults());
                docker = c.dockerArgs();
                cdi = c.cdiArgs();
                problem = Optional.empty();
            } catch (GpuException | IllegalArgumentException e) {
                problem = Optional.of(e.getMessage());
            }
        }
        return environment(a.id(), env, docker, cdi, problem);
    }

    /** @return {@code env} as the client's value */
    static AllocationEnvironment environment(String id, CudaEnvironment env, List<String> docker, List<String> cdi,
            Optional<String> problem) {
        return new AllocationEnvironment(id, env.variables(), env.pathPrepends(),
                env.installation().map(i -> new AllocationEnvironment.Installation(i.root().toString(),
                        i.version().map(Object::toString))),
                env.compatibility().map(c -> String.valueOf(c.verdict())), env.notes(), docker, cdi, problem);
    }

    /** @return the CUDA resolver of this command's configuration */
    CudaEnvironmentResolver resolver() {
        return CudaOutput.resolver(node != null ? node.config() : Node.read(simulate, config, stateDir).config());
    }

    @Override
    public JobExit run(JobSpec spec, JobListener listener) throws InterruptedException {
        Node n = opened();
        JobListener tracking = new JobListener() {
            @Override
            public void queued(int position) {
                listener.queued(position);
            }

            @Override
            public void started(JobView job, AllocationView allocation) {
                runningId = job.id();
                listener.started(job, allocation);
            }

            @Override
            public void stdout(byte[] data) {
                listener.stdout(data);
            }

            @Override
            public void stderr(byte[] data) {
                listener.stderr(data);
            }
        };
        RunSampler sampler = RunSampler.start(n, config); // the node's accounting sampler when no other process is
        try {
            return LocalRun.run(n.scheduler(), n.inventory().devices(), resolver(), options, spec,
                    request(spec.flags()), tracking, p -> running = p, err);
        } finally {
            sampler.close();
            running = null;
            runningId = null;
        }
    }

    @Override
    public JobView submit(JobSpec spec) {
        throw serviceOnly("run --detach (a job with no client attached)");
    }

    @Override
    public List<JobView> jobs() {
        throw serviceOnly("gpusched jobs");
    }

    @Override
    public Optional<JobView> job(String id) {
        throw serviceOnly("jobs");
    }

    @Override
    public void logs(String id, boolean follow, OutputStream out) {
        throw serviceOnly("gpusched logs");
    }

    @Override
    public JobView cancel(String id) {
        throw serviceOnly("gpusched cancel");
    }

    /**
     * Passes a signal on to the job this client runs ({@link #run}); any other job is the service's. {@code INT} is not
     * passed on: a local job is in this command's process group, so the terminal's Ctrl-C reaches it directly.
     */
    @Override
    public JobView signal(String id, String signal) {
        Process p = running;
        if (p == null || !id.equals(runningId)) {
            throw serviceOnly("signals to job " + id);
        }
        if (!signal.equals("INT") && p.isAlive()) {
            try {
                new ProcessBuilder("kill", "-s", signal, Long.toString(p.pid())).redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start().waitFor();
            } catch (IOException e) {
                throw new CliException("cannot signal job " + id + ": " + e.getMessage());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return new JobView(id, System.getProperty("user.name"), null, p.isAlive() ? "RUNNING" : "EXITED", id,
                List.of(), null, null, null, null, null, false, null, null, null, null);
    }

    @Override
    public Identity whoami() {
        UnixSystem u = new UnixSystem();
        List<String> groups = new ArrayList<>();
        for (long g : u.getGroups()) {
            groups.add(Long.toString(g));
        }
        return new Identity(u.getUid(), u.getGid(), u.getUsername(), groups, u.getUid() == 0);
    }

    @Override
    public synchronized String source() {
        Path dir = node != null ? node.stateDirectory() : readFrom;
        return dir == null ? "the local node ledger" : "the node ledger " + dir;
    }

    private CliException serviceOnly(String what) {
        return new CliException(what + " needs the node service (gpusched serve), but this command uses a local"
                + " ledger: " + why);
    }

    @Override
    public synchronized void close() {
        if (node != null) {
            node.close();
            node = null;
        }
    }
}
