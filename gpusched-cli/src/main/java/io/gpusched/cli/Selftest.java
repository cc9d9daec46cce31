package io.gpusched.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.client.NodeInfo;
import io.gpusched.client.ServiceClient;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuHealth;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.host.InventorySpec;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.server.ConsoleServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * {@code gpusched selftest}'s checks, each with a verdict and, when it fails, the cause and the remedy. Each check
 * changes nothing on the host it does not restore: its scheduler keeps its ledger in memory, its device nodes and
 * cgroup are made under a temporary directory and the cgroup root and removed after, and nothing touches a GPU's
 * MIG mode or clocks.
 */
public final class Selftest {

    /** A check's outcome. */
    public enum Verdict {
        /** It ran and passed. */
        PASS,
        /** It ran and failed: see the cause and the remedy. */
        FAIL,
        /** It could not run here (the cause says why); it does not fail the self-test. */
        SKIPPED
    }

    /**
     * One check's result.
     *
     * @param name    the check ({@code discovery}, {@code health}, {@code fence}, {@code console}, {@code cuda},
     *                {@code service})
     * @param verdict its verdict
     * @param detail  what it found
     * @param cause   why it failed or was skipped; null when it passed
     * @param remedy  what to do about a failure; null otherwise
     */
    public record Check(String name, Verdict verdict, String detail, String cause, String remedy) {
        /** @throws NullPointerException for a missing name, verdict or detail */
        public Check {
            Objects.requireNonNull(name, "name");
            Objects.requireNonNull(verdict, "verdict");
            Objects.requireNonNull(detail, "detail");
        }

        static Check pass(String name, String detail) {
            return new Check(name, Verdict.PASS, detail, null, null);
        }

        static Check fail(String name, String detail, String cause, String remedy) {
            return new Check(name, Verdict.FAIL, detail, cause, remedy);
        }

        static Check skipped(String name, String cause) {
            return new Check(name, Verdict.SKIPPED, "not run", cause, null);
        }
    }

    /**
     * The whole self-test.
     *
     * @param simulated whether it ran on a simulated node (this host's GPUs were not used)
     * @param node      the backend it ran on ({@code simulated:dgx1-v100}, {@code nvml})
     * @param note      why it ran on a simulated node without being asked to (no GPU backend here); null otherwise
     * @param passed    true when no check failed (skipped ones do not count)
     * @param checks    the checks in the order they ran
     */
    public record Report(boolean simulated, String node, String note, boolean passed, List<Check> checks) {
        /** Copies the list. */
        public Report {
            checks = List.copyOf(checks);
        }
    }

    /** Makes a fence: the real isolator's in the command, something else in a test of the failure path. */
    @FunctionalInterface
    public interface Fencer {
        /** @return what revokes the fence when closed */
        AutoCloseable fence(CgroupDeviceIsolator isolator, Path cgroup, Allocation allocation) throws Exception;
    }

    /** The command's fencer: {@link CgroupDeviceIsolator#fence}. */
    public static final Fencer REAL_FENCE = CgroupDeviceIsolator::fence;

    private Selftest() {
    }

    // ---- discovery ----------------------------------------------------------------------------------------------

    /**
     * @param byBackend each backend's devices, as it discovered them
     * @param simulated whether these are simulated
     * @return PASS when every backend reports the same GPUs (UUID, memory, PCI bus id, minor number), FAIL naming
     *         each difference
     */
    public static Check discovery(Map<String, List<GpuDevice>> byBackend, boolean simulated) {
        List<String> differences = disagreements(byBackend);
        String what = byBackend.size() + (byBackend.size() == 1 ? " backend (" : " backends (")
                + String.join(", ", byBackend.keySet()) + ")";
        int gpus = byBackend.values().stream().findFirst().map(List::size).orElse(0);
        if (differences.isEmpty()) {
            return Check.pass("discovery", what + " agree on " + gpus + " GPUs: UUIDs, memory, PCI bus ids, minor"
                    + " numbers" + (simulated ? " (simulated: the node description, opened twice)" : ""));
        }
        List<String> shown = differences.size() > 8 ? differences.subList(0, 8) : differences;
        return Check.fail("discovery", what + " disagree", String.join("; ", shown)
                + (differences.size() > shown.size() ? "; " + (differences.size() - shown.size()) + " more" : ""),
                "a backend reads the driver wrongly or the driver is in a bad state: compare nvidia-smi -q -x with"
                        + " /proc/driver/nvidia/gpus/*/information, reload the driver, and report the difference"
                        + " with gpusched doctor's output");
    }

    /** @return each difference between the first backend and each other, by UUID */
    static List<String> disagreements(Map<String, List<GpuDevice>> byBackend) {
        List<String> out = new ArrayList<>();
        Map.Entry<String, List<GpuDevice>> first = null;
        for (Map.Entry<String, List<GpuDevice>> e : byBackend.entrySet()) {
            if (first == null) {
                first = e;
                continue;
            }
            Map<String, GpuDevice> theirs = new LinkedHashMap<>();
            e.getValue().forEach(d -> theirs.put(d.uuid(), d));
            for (GpuDevice mine : first.getValue()) {
                GpuDevice other = theirs.remove(mine.uuid());
                if (other == null) {
                    out.add(e.getKey() + " does not see " + mine.uuid() + " that " + first.getKey() + " does");
                    continue;
                }
                String pair = first.getKey() + " vs " + e.getKey() + " for " + mine.uuid();
                if (mine.memoryKnown() && other.memoryKnown() && !mine.memory().equals(other.memory())) {
                    out.add("memory " + mine.memory().toHumanString() + " vs " + other.memory().toHumanString() + " ("
                            + pair + ")");
                }
                if (!mine.pciBusId().equalsIgnoreCase(other.pciBusId())) {
                    out.add("PCI bus id " + mine.pciBusId() + " vs " + other.pciBusId() + " (" + pair + ")");
                }
                if (mine.minor().isPresent() && other.minor().isPresent()
                        && mine.minor().getAsInt() != other.minor().getAsInt()) {
                    out.add("minor " + mine.minor().getAsInt() + " vs " + other.minor().getAsInt() + " (" + pair
                            + ")");
                }
            }
            for (String u : theirs.keySet()) {
                out.add(first.getKey() + " does not see " + u + " that " + e.getKey() + " does");
            }
        }
        return out;
    }

    /**
     * @param simulate           the simulated node's profile or file, if the node is simulated
     * @param availableProviders the host's available inventory providers, by name
     * @param config             the configuration the inventories are opened with
     * @return each available backend's devices (a simulated node: its description opened twice, independently)
     */
    public static Map<String, List<GpuDevice>> discover(Optional<String> simulate, List<String> availableProviders,
            GpuConfig config) {
        Map<String, List<GpuDevice>> out = new LinkedHashMap<>();
        if (simulate.isPresent()) {
            for (String k : List.of("first read", "second read")) {
                try (GpuInventory inv = InventorySpec.simulated(simulate.get()).open(config)) {
                    out.put("simulated:" + simulate.get() + " (" + k + ")", inv.devices());
                }
            }
            return out;
        }
        for (String p : availableProviders) {
            try (GpuInventory inv = InventorySpec.parse(p).open(config)) {
                out.put(p, inv.devices());
            }
        }
        return out;
    }

    // ---- health ---------------------------------------------------------------------------------------------------

    /** @return PASS when every GPU reads healthy, FAIL naming the ones that do not and their reasons */
    public static Check health(GpuInventory inv) {
        List<String> sick = new ArrayList<>();
        for (GpuDevice d : inv.devices()) {
            GpuHealth h = inv.health(d);
            if (!h.isHealthy()) {
                sick.add("GPU " + d.index() + " (" + d.uuid() + ") " + h);
            }
        }
        if (sick.isEmpty()) {
            return Check.pass("health", inv.devices().size() + " GPUs healthy");
        }
        return Check.fail("health", sick.size() + " of " + inv.devices().size() + " GPUs not healthy",
                String.join("; ", sick.size() > 8 ? sick.subList(0, 8) : sick),
                "see the XID in dmesg (NVIDIA) or the kernel log; drain the GPU (gpusched drain) and reset or service"
                        + " it; gpusched keeps unhealthy GPUs out of allocations meanwhile");
    }

    // ---- fence ----------------------------------------------------------------------------------------------------

    /**
     * A real fence on fake device nodes: two NVIDIA GPU nodes and {@code nvidiactl} made with {@code mknod} under
     * {@code work} (no driver behind them: an open the device cgroup passes fails with ENXIO, one it refuses with
     * EPERM), a fresh cgroup under the host's cgroup root, the fence of an allocation of GPU 0, and a shell placed in
     * the cgroup that opens both GPU nodes. Passes when GPU 0's node opens (ENXIO) and GPU 1's is refused (EPERM).
     * The cgroup and the nodes are removed after.
     */
    public static Check fence(Path work, Fencer fencer) {
        if (!isRoot()) {
            return Check.skipped("fence", "needs root (to make device nodes and a cgroup); run sudo gpusched"
                    + " selftest to check the fence");
        }
        Path cgroup = null;
        try {
            Path dev = Files.createDirectories(work.resolve("dev"));
            mknod(dev.resolve("nvidia0"), 195, 0);
            mknod(dev.resolve("nvidia1"), 195, 1);
            mknod(dev.resolve("nvidiactl"), 195, 255);
            Path proc = Files.createDirectories(work.resolve("proc"));
            Files.writeString(proc.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia-frontend\n\n"
                    + "Block devices:\n  8 sd\n");
            SimulatedGpuInventory.Builder b = SimulatedGpuInventory.builder("selftest-fence");
            for (int i = 0; i < 2; i++) {
                b.device(GpuDevice.builder().index(i).uuid("GPU-selftest-" + i).vendor(GpuVendor.NVIDIA)
                        .name("selftest GPU").memory(MemorySize.ofGibibytes(16)).pciBusId("00000000:0" + i + ":00.0")
                        .minor(i).build());
            }
            try (SimulatedGpuInventory host = b.build();
                 GpuScheduler s = GpuScheduler.builder().inventory(host).auditLogging(false).build()) {
                CgroupDeviceIsolator iso = CgroupDeviceIsolator.builder().hostDevices(host.devices()).devRoot(dev)
                        .procRoot(proc).stateDir(Files.createDirectories(work.resolve("isolation")))
                        .noNvidiaModprobe().build();
                Optional<String> unavailable = iso.unavailabilityCause();
                if (unavailable.isPresent()) {
                    return Check.skipped("fence", "device isolation is not available here: " + unavailable.get());
                }
                Path root = iso.v2Root().or(iso::v1Root).orElseThrow();
                cgroup = Files.createDirectory(root.resolve("gpusched-selftest-"
                        + UUID.randomUUID().toString().substring(0, 8)));
                Allocation a = s.allocate(GpuRequest.builder().deviceIndices(0).owner("selftest").build());
                Map<String, String> seen;
                try (AutoCloseable f = fencer.fence(iso, cgroup, a)) {
                    seen = probe(cgroup, dev.resolve("nvidia0"), dev.resolve("nvidia1"));
                }
                String mechanism = iso.v2Root().isPresent() ? "cgroup v2 (eBPF)" : "cgroup v1 devices";
                String own = seen.getOrDefault("nvidia0", "?");
                String other = seen.getOrDefault("nvidia1", "?");
                String found = "in a fenced " + mechanism + " cgroup, its GPU's node: " + own + ", another GPU's: "
                        + other;
                if ("EACCES".equals(own)) {
                    return Check.skipped("fence", "device nodes cannot be opened under " + work + " (a nodev"
                            + " mount): " + found + "; set TMPDIR (java.io.tmpdir) to a directory on a filesystem"
                            + " without nodev");
                }
                if ("ENXIO".equals(own) && "EPERM".equals(other)) {
                    return Check.pass("fence", found);
                }
                return Check.fail("fence", found, "EPERM".equals(other)
                        ? "the fence refused the allocated GPU's own node"
                        : "the kernel did not apply the fence: a fenced process opened another GPU's node",
                        "check the devices controller (cgroup v1) or BPF cgroup device programs"
                                + " (CONFIG_CGROUP_BPF, cgroup v2) with gpusched doctor; until it works run jobs"
                                + " only where GPUs are not shared");
            }
        } catch (Exception e) {
            return Check.fail("fence", "the fence could not be set up", String.valueOf(e.getMessage()),
                    "gpusched doctor shows the isolation this host has");
        } finally {
            if (cgroup != null) {
                try {
                    Files.deleteIfExists(cgroup);
                } catch (IOException e) {
                    // left for JobCgroups' stale clean-up; named in the log
                    System.getLogger(Selftest.class.getName()).log(System.Logger.Level.WARNING,
                            "could not remove " + cgroup + ": " + e);
                }
            }
        }
    }

    private static boolean isRoot() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("Uid:")) {
                    return line.split("\\s+")[2].equals("0");
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    private static void mknod(Path node, int major, int minor) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("mknod", "-m", "666", node.toString(), "c", String.valueOf(major),
                String.valueOf(minor)).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("mknod " + node + " failed: " + out);
        }
    }

    /** A shell placed in the cgroup opens each node; @return node name to OK, ENXIO, EPERM or the error */
    private static Map<String, String> probe(Path cgroup, Path... nodes) throws IOException, InterruptedException {
        String script = "echo $$ > \"$0/cgroup.procs\" || exit 97\n"
                + "for f in \"$@\"; do\n"
                + "  if err=$(dd if=\"$f\" of=/dev/null count=0 2>&1); then echo \"$f OK\"; else echo \"$f $err\"; fi\n"
                + "done\n";
        List<String> cmd = new ArrayList<>(List.of("sh", "-c", script, cgroup.toString()));
        for (Path n : nodes) {
            cmd.add(n.toString());
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException("the probe in " + cgroup + " failed: " + out.strip());
        }
        Map<String, String> r = new LinkedHashMap<>();
        for (String line : out.strip().split("\n")) {
            int sp = line.indexOf(' ');
            if (sp < 0) {
                continue;
            }
            String name = Path.of(line.substring(0, sp)).getFileName().toString();
            r.put(name, line.endsWith(" OK") ? "OK" : line.contains("No such device or address") ? "ENXIO"
                    : line.contains("Operation not permitted") ? "EPERM"
                    : line.contains("Permission denied") ? "EACCES" : line.substring(sp + 1).strip());
        }
        return r;
    }

    // ---- cuda ---------------------------------------------------------------------------------------------------

    /**
     * Allocates GPU 0 of {@code inv} in an in-memory scheduler and resolves its job environment with
     * {@code resolver}: passes when the environment selects exactly that GPU. A device query through a CUDA runtime
     * is not made (left out for now: it needs a native binding to {@code libcudart}).
     */
    public static Check cuda(GpuInventory inv, CudaEnvironmentResolver resolver) {
        if (inv.devices().isEmpty()) {
            return Check.skipped("cuda", "the node has no GPUs");
        }
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            Allocation a = s.allocate(GpuRequest.builder().deviceIndices(inv.devices().get(0).index())
                    .owner("selftest").build());
            CudaEnvironment env = resolver.resolve(a, CudaRequirement.NONE);
            GpuDevice d = a.devices().get(0);
            String selector = d.vendor() == GpuVendor.AMD ? "ROCR_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
            String v = env.variables().get(selector);
            String installation = env.installation().map(i -> "CUDA " + i.version().map(String::valueOf).orElse("?")
                    + " at " + i.root()).orElse(env.notes().isEmpty() ? "no CUDA installation found"
                            : String.join("; ", env.notes()));
            if (v == null || !(v.equals(d.uuid()) || v.equals(String.valueOf(d.index())))) {
                return Check.fail("cuda", "the environment of an allocation of GPU " + d.index() + " has "
                        + selector + "=" + v, "the environment does not select the allocated GPU",
                        "report it with gpusched doctor's output");
            }
            return Check.pass("cuda", selector + "=" + v + " for GPU " + d.index() + "; " + installation
                    + "; no device query made through a CUDA runtime");
        } catch (RuntimeException e) {
            return Check.fail("cuda", "the CUDA environment could not be resolved", String.valueOf(e.getMessage()),
                    "gpusched doctor lists the CUDA installations and their verdicts");
        }
    }

    // ---- service ------------------------------------------------------------------------------------------------

    /**
     * Asks the node service on {@code socket} who it is and for its GPUs; skipped when no socket is there (no service
     * configured or running).
     */
    public static Check service(Path socket) {
        if (!Files.exists(socket, LinkOption.NOFOLLOW_LINKS)) {
            return Check.skipped("service", "no node service here (no socket at " + socket + "; sudo systemctl"
                    + " enable --now gpusched starts one)");
        }
        try (ServiceClient c = ServiceClient.connect(socket)) {
            NodeInfo n = c.node();
            int listed = c.devices().size();
            if (listed != n.gpus()) {
                return Check.fail("service", "answered on " + socket, "it says " + n.gpus() + " GPUs but lists "
                        + listed, "restart it (sudo systemctl restart gpusched) and report its log");
            }
            return Check.pass("service", "answered on " + socket + ": " + n.backend() + ", " + n.gpus() + " GPUs,"
                    + " version " + n.version());
        } catch (RuntimeException e) {
            return Check.fail("service", "the node service on " + socket + " did not answer",
                    String.valueOf(e.getMessage()), "sudo systemctl status gpusched; journalctl -u gpusched; the"
                            + " socket's group (gpusched) must include you");
        }
    }

    // ---- console --------------------------------------------------------------------------------------------------

    /**
     * Starts the node console on {@code port} of the loopback address (0: a free one) over an in-memory scheduler
     * of {@code inv}, asks {@code /api/v1/devices} and stops it.
     */
    public static Check console(GpuInventory inv, int port, Path work) {
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
            ConsoleServer c;
            try {
                c = ConsoleServer.builder().scheduler(s).stateDir(Files.createDirectories(work.resolve("console")))
                        .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), port)).build().start();
            } catch (RuntimeException | IOException e) {
                return Check.fail("console", "the console did not start on 127.0.0.1:" + port,
                        String.valueOf(e.getMessage()), port == 0 ? "gpusched doctor; run with --verbose for the trace"
                                : "port " + port + " may be in use: choose another with --console-port, or stop"
                                        + " what listens there (ss -ltnp)");
            }
            try (c) {
                int p = c.address().getPort();
                HttpResponse<String> r = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build().send(
                        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p + "/api/v1/devices"))
                                .timeout(Duration.ofSeconds(30)).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                JsonNode body = r.statusCode() == 200 ? new ObjectMapper().readTree(r.body()) : null;
                int n = body != null && body.isArray() ? body.size() : -1;
                if (n == inv.devices().size()) {
                    return Check.pass("console", "answered on 127.0.0.1:" + p + " with its " + n + " GPUs");
                }
                return Check.fail("console", "answered " + r.statusCode() + " on 127.0.0.1:" + p,
                        "GET /api/v1/devices gave " + (n < 0 ? "no device list" : n + " GPUs of "
                                + inv.devices().size()),
                        "run gpusched serve --verbose and report its log");
            }
        } catch (Exception e) {
            return Check.fail("console", "the console did not answer", String.valueOf(e.getMessage()),
                    "run gpusched serve --verbose and report its log");
        }
    }
}
