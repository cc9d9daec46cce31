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
import io.gpusched.cuda.CudaDeviceQuery;
import io.gpusched.cuda.CudaEnvironment;
import io.gpusched.cuda.CudaEnvironmentResolver;
import io.gpusched.cuda.CudaRequirement;
import io.gpusched.isolation.CgroupDeviceIsolator;
import io.gpusched.kubernetes.AdvertisedResource;
import io.gpusched.kubernetes.DevicePluginConfig;
import io.gpusched.kubernetes.KubeletDevicePlugin;
import io.gpusched.kubernetes.KubeletProbe;
import io.gpusched.kubernetes.ResourcePlan;
import io.gpusched.server.ConsoleServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

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
     *                {@code cuda-query}, {@code kubernetes}, {@code service})
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
    /** The longest path of a Unix socket (sun_path's 108 bytes less the NUL). */
    static final int SUN_PATH_MAX = 107;
    /** Room left for a socket's file name in the plug-in directory ({@code gpusched-nvidia.com-gpu.sock}: 28). */
    static final int SOCKET_NAME_ROOM = 48;
    /** The cgroups a fence check has made and not yet removed: a shutdown hook removes them ({@link #removeLeft}). */
    private static final Set<Path> LIVE_CGROUPS = ConcurrentHashMap.newKeySet();
    /** Set by {@link #removeLeft}: a self-test being stopped makes no new cgroup. */
    private static volatile boolean stopping;

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
     * the cgroup that opens both GPU nodes. Passes when GPU 0's node opens past the fence (ENXIO, or opened where an
     * NVIDIA driver answers for major 195) and GPU 1's is refused (EPERM).
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
                    // run as root, so nothing but the host keeps the fence from working: every job here would run
                    // unfenced (a check that could run, and failed; not a skip)
                    return Check.fail("fence", "no fenced cgroup can be made here",
                            "device isolation is not available here: " + unavailable.get(),
                            "mount the cgroup hierarchy (cgroup v2 at /sys/fs/cgroup, or cgroup v1's devices"
                                    + " controller) with write access for root; in a container, run it with its"
                                    + " own cgroup namespace and the devices controller (jobs here cannot be"
                                    + " fenced until then)");
                }
                Path root = iso.v2Root().or(iso::v1Root).orElseThrow();
                if (stopping) {
                    throw new IOException("the self-test is being stopped");
                }
                cgroup = Files.createDirectory(root.resolve("gpusched-selftest-"
                        + UUID.randomUUID().toString().substring(0, 8)));
                LIVE_CGROUPS.add(cgroup);
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
                // ENXIO: the open passed the fence and found no driver behind the node; OK: it passed and a real
                // driver (major 195 is NVIDIA's) answered, as on a GPU node. Either way the fence let it through
                if (("ENXIO".equals(own) || "OK".equals(own)) && "EPERM".equals(other)) {
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
                    LIVE_CGROUPS.remove(cgroup);
                } catch (IOException e) {
                    // left for JobCgroups' stale clean-up; named in the log
                    System.getLogger(Selftest.class.getName()).log(System.Logger.Level.WARNING,
                            "could not remove " + cgroup + ": " + e);
                }
            }
        }
    }

    /**
     * Removes what a self-test stopped midway (SIGTERM, Ctrl-C) left: the fence check's cgroups, deepest first, each
     * tried for up to 2 s while its probe exits, and then {@code work}. For a shutdown hook; failures are ignored.
     */
    public static void removeLeft(Path work) {
        stopping = true;
        // the checks' thread runs on while the JVM stops and may make more (a device node, a directory): removed again
        // until two passes 100 ms apart find nothing, at most 3 s
        for (int pass = 0, clean = 0; pass < 30 && clean < 2; pass++) {
            boolean found = !LIVE_CGROUPS.isEmpty() || Files.exists(work, LinkOption.NOFOLLOW_LINKS);
            removeOnce(work);
            clean = found ? 0 : clean + 1;
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** @return whether a stop began ({@link #removeLeft} ran) */
    public static boolean stopping() {
        return stopping;
    }

    private static void removeOnce(Path work) {
        for (Path c : List.copyOf(LIVE_CGROUPS)) {
            for (int i = 0; i < 40 && Files.isDirectory(c, LinkOption.NOFOLLOW_LINKS); i++) {
                try (Stream<Path> s = Files.walk(c)) {
                    for (Path d : s.filter(Files::isDirectory).sorted(Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(d);
                    }
                } catch (IOException | UncheckedIOException e) {
                    try {
                        Thread.sleep(50); // a process still in it (the probe's shell): it ends on its own
                    } catch (InterruptedException x) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
            }
            LIVE_CGROUPS.remove(c);
        }
        try {
            deleteTree(work);
        } catch (UncheckedIOException e) {
            // a stop midway: whatever could not be removed stays, named by nothing (the JVM is ending)
        }
    }

    /** Removes {@code dir} and everything under it (not following links) @throws UncheckedIOException naming it */
    public static void deleteTree(Path dir) {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path f, BasicFileAttributes a) throws IOException {
                    Files.delete(f);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException x) throws IOException {
                    Files.delete(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException x) {
            throw new UncheckedIOException("could not remove the self-test's " + dir, x);
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
     * {@code resolver}: passes when the environment selects exactly that GPU. The device query through CUDA is
     * {@link #cudaQuery}.
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
                    + "; the device query through CUDA is the cuda-query check");
        } catch (RuntimeException e) {
            return Check.fail("cuda", "the CUDA environment could not be resolved", String.valueOf(e.getMessage()),
                    "gpusched doctor lists the CUDA installations and their verdicts");
        }
    }

    // ---- cuda-query -----------------------------------------------------------------------------------------------

    /** Runs a CUDA device query: the driver's through a child JVM in the command, a canned answer in a test. */
    @FunctionalInterface
    interface CudaQuery {
        /** @return the driver's answer for these GPUs ({@code CUDA_VISIBLE_DEVICES}) */
        CudaDeviceQuery.Result query(List<String> visibleDevices);
    }

    /** How long the CUDA device query may take. */
    static final Duration CUDA_QUERY_BOUND = Duration.ofSeconds(60);

    /**
     * A device query through the CUDA driver API ({@link CudaDeviceQuery}: {@code libcuda.so.1}'s cuInit,
     * cuDeviceGetCount and cuDeviceGetUuid in a child JVM with {@code CUDA_VISIBLE_DEVICES} set to the node's whole
     * NVIDIA GPUs): passes when CUDA counts as many devices as discovery and their UUIDs are the node's, in order.
     * Skipped on a simulated node (CUDA would see this host's GPUs, not the simulated ones), on a node without NVIDIA
     * GPUs, and where no CUDA driver library can be loaded.
     */
    public static Check cudaQuery(GpuInventory inv, boolean simulated) {
        return cudaQuery(inv, simulated,
                v -> CudaDeviceQuery.run(CudaDeviceQuery.DRIVER_LIBRARY, v, CUDA_QUERY_BOUND));
    }

    static Check cudaQuery(GpuInventory inv, boolean simulated, CudaQuery query) {
        if (simulated) {
            return Check.skipped("cuda-query", "the node is simulated: a CUDA device query would see this host's"
                    + " GPUs, not the simulated ones");
        }
        List<String> uuids = inv.devices().stream().filter(d -> d.vendor() == GpuVendor.NVIDIA && !d.isPartition())
                .map(GpuDevice::uuid).toList();
        if (uuids.isEmpty()) {
            return Check.skipped("cuda-query", "the node has no whole NVIDIA GPU to query through CUDA");
        }
        CudaDeviceQuery.Result r = query.query(uuids);
        String remedy = "nvidia-smi should list the GPUs; check the driver is loaded (lsmod | grep nvidia), that"
                + " /dev/nvidia* exist and are readable by you, that the CUDA library matches the kernel module"
                + " (dmesg: API mismatch), and that the GPUs are not in a prohibited compute mode";
        switch (r.status()) {
            case NO_DRIVER:
                return Check.skipped("cuda-query", "no CUDA driver library (" + CudaDeviceQuery.DRIVER_LIBRARY
                        + ") could be loaded here: " + r.message() + "; install the NVIDIA driver's CUDA library"
                        + " (Debian: libcuda1) to check CUDA");
            case FAILED:
                return Check.fail("cuda-query", "the CUDA driver API could not list the " + uuids.size() + " GPUs",
                        r.message(), remedy);
            default:
                break;
        }
        List<String> problems = new ArrayList<>();
        if (r.uuids().size() != uuids.size()) {
            problems.add("CUDA counts " + r.uuids().size() + " devices, discovery " + uuids.size());
        }
        for (int i = 0; i < Math.max(uuids.size(), r.uuids().size()); i++) {
            String mine = i < uuids.size() ? uuids.get(i) : null;
            String theirs = i < r.uuids().size() ? r.uuids().get(i) : null;
            if (mine != null && theirs != null && !mine.equalsIgnoreCase(theirs)) {
                problems.add("device " + i + ": CUDA " + theirs + ", discovery " + mine);
            } else if (mine != null && theirs == null) {
                problems.add("CUDA does not see " + mine);
            } else if (mine == null) {
                problems.add("CUDA sees " + theirs + " that discovery does not");
            }
        }
        if (problems.isEmpty()) {
            return Check.pass("cuda-query", "cuDeviceGetCount " + r.uuids().size() + " and cuDeviceGetUuid agree"
                    + " with discovery");
        }
        return Check.fail("cuda-query", "CUDA and discovery disagree", String.join("; ", problems.size() > 8
                ? problems.subList(0, 8) : problems), remedy);
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
                    String.valueOf(e.getMessage()), "sudo systemctl status gpusched; journalctl -u gpusched"
                            + socketAccess(socket));
        }
    }

    /**
     * @return what the socket's own mode says a user needs to connect ({@code gpu.service.socket_group}, or any
     *     local user), or nothing when it cannot be read
     */
    private static String socketAccess(Path socket) {
        try {
            PosixFileAttributes a = Files.readAttributes(socket, PosixFileAttributes.class);
            Set<PosixFilePermission> p = a.permissions();
            if (p.contains(PosixFilePermission.OTHERS_WRITE)) {
                return "; the socket lets every local user connect";
            }
            return "; only its owner (" + a.owner().getName() + ")" + (p.contains(PosixFilePermission.GROUP_WRITE)
                    ? " and members of its group (" + a.group().getName() + ", gpu.service.socket_group)" : "")
                    + " may connect to the socket";
        } catch (IOException | UnsupportedOperationException e) {
            return "";
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

    // ---- kubernetes -----------------------------------------------------------------------------------------------

    /** Starts a device plug-in: the real one in the command, a broken one in a test of a failure path. */
    @FunctionalInterface
    interface PluginStarter {
        /** @return what stops the plug-in when closed */
        AutoCloseable start(GpuInventory inventory, DevicePluginConfig config) throws IOException;
    }

    /** How long each step of the kubernetes check waits at most (registration, the first list, Allocate). */
    static final Duration KUBERNETES_BOUND = Duration.ofSeconds(30);

    /**
     * The Kubernetes device plug-in ({@link KubeletDevicePlugin}) started on {@code inv} with its device-plug-in
     * directory under {@code work}, where a {@link KubeletProbe} stands in for the kubelet: passes when the plug-in
     * registers every resource {@link ResourcePlan} gives the node (API v1beta1: {@code nvidia.com/gpu} or
     * {@code amd.com/gpu}, and on a MIG node one {@code nvidia.com/mig-<profile>} per profile), the first ListAndWatch
     * list of the first such resource names exactly its healthy GPUs or partitions, and Allocate of one answers
     * that GPU's device node, the vendor's control nodes ({@code /dev/nvidiactl}, {@code /dev/nvidia-uvm};
     * {@code /dev/kfd}) and no other GPU's, and the variable that selects it. On a simulated node the plug-in
     * reads a {@code /proc/devices} written under {@code work}. Skipped where gRPC over Unix sockets cannot run or the
     * node has no GPU the plug-in advertises. The plug-in, the
     * stand-in and their sockets are gone when it returns.
     */
    public static Check kubernetes(GpuInventory inv, boolean simulated, Path work) {
        return kubernetes(inv, simulated, work, KubeletDevicePlugin::start, KUBERNETES_BOUND);
    }

    static Check kubernetes(GpuInventory inv, boolean simulated, Path work, PluginStarter starter, Duration bound) {
        if (!KubeletProbe.available()) {
            return Check.skipped("kubernetes", "the device plug-in cannot run here: gRPC over Unix domain sockets"
                    + " (epoll) is unavailable: " + KubeletProbe.unavailabilityCause());
        }
        // what the plug-in advertises with its defaults: whole GPUs under nvidia.com/gpu or amd.com/gpu, MIG
        // partitions each under the resource of their profile (nvidia.com/mig-3g.40gb, ...), as ResourcePlan decides
        List<AdvertisedResource> plan = ResourcePlan.plan(inv.devices(), DevicePluginConfig.builder().build(),
                new ArrayList<>());
        if (plan.isEmpty()) {
            return Check.skipped("kubernetes", "the node has no GPU or MIG partition for the plug-in to advertise");
        }
        List<GpuDevice> whole = plan.stream().flatMap(r -> r.devices().stream()).map(AdvertisedResource.Entry::device)
                .distinct().toList();
        AdvertisedResource checked = plan.stream().filter(r -> r.devices().stream().anyMatch(e -> inv.health(
                e.device()).isHealthy())).findFirst().orElse(null);
        if (checked == null) {
            return Check.skipped("kubernetes", "no healthy GPU to allocate through the plug-in (see the health"
                    + " check)");
        }
        String resource = checked.name();
        List<AdvertisedResource.Entry> expected = checked.devices().stream().filter(e -> inv.health(e.device())
                .isHealthy()).toList();
        String remedy = "run gpusched k8s-device-plugin --verbose and report its log with gpusched doctor's output";
        Path shortDir = null;
        try {
            Path dir = Files.createDirectories(work.resolve("k8s"));
            // the stand-in's and the plug-in's sockets: a Unix socket's path is at most 107 bytes; under a long
            // java.io.tmpdir they go to a short directory of their own (removed after)
            if (dir.toString().getBytes(StandardCharsets.UTF_8).length + 1 + SOCKET_NAME_ROOM > SUN_PATH_MAX) {
                shortDir = Files.createTempDirectory(Path.of("/tmp"), "gpusched-k8s-");
                dir = shortDir;
            }
            DevicePluginConfig.Builder cb = DevicePluginConfig.builder().pluginDirectory(dir);
            if (simulated) {
                Path proc = Files.createDirectories(work.resolve("k8s-proc"));
                Files.writeString(proc.resolve("devices"), "Character devices:\n  1 mem\n195 nvidia\n"
                        + "508 nvidia-uvm\n226 drm\n510 kfd\n\nBlock devices:\n  8 sd\n");
                cb.devRoot(Files.createDirectories(work.resolve("k8s-dev"))).procRoot(proc);
            }
            try (KubeletProbe kubelet = KubeletProbe.start(dir);
                 AutoCloseable plugin = starter.start(inv, cb.build())) {
                Optional<KubeletProbe.Registration> reg = kubelet.awaitRegistration(1, bound);
                if (reg.isEmpty()) {
                    return Check.fail("kubernetes", "the device plug-in did not register with the kubelet stand-in on "
                            + kubelet.socket(), "no Register call within " + bound.toSeconds() + " s", remedy);
                }
                kubelet.awaitRegistration(plan.size(), bound); // one per resource, each from its own server
                Set<String> registered = new TreeSet<>();
                String version = reg.get().version();
                for (KubeletProbe.Registration r : kubelet.registrations()) {
                    registered.add(r.resourceName());
                    if (!DevicePluginConfig.API_VERSION.equals(r.version())) {
                        version = r.version();
                    }
                }
                Set<String> planned = new TreeSet<>(plan.stream().map(AdvertisedResource::name).toList());
                if (!DevicePluginConfig.API_VERSION.equals(version) || !registered.equals(planned)) {
                    return Check.fail("kubernetes", "the device plug-in registered " + String.join(", ", registered)
                            + " with API " + version,
                            "expected " + String.join(", ", planned) + " with API "
                                    + DevicePluginConfig.API_VERSION,
                            remedy);
                }
                Set<String> healthy = new TreeSet<>();
                kubelet.firstList(resource, bound).forEach((id, health) -> {
                    if ("Healthy".equals(health)) {
                        healthy.add(id);
                    }
                });
                Set<String> want = new TreeSet<>(expected.stream().map(AdvertisedResource.Entry::id).toList());
                if (!healthy.equals(want)) {
                    Set<String> missing = new TreeSet<>(want);
                    missing.removeAll(healthy);
                    Set<String> extra = new TreeSet<>(healthy);
                    extra.removeAll(want);
                    return Check.fail("kubernetes", "ListAndWatch listed " + healthy.size() + " healthy devices of "
                            + resource + ", the node has " + want.size() + " healthy "
                            + (checked.devices().get(0).device().isPartition() ? "partitions of that profile" : "GPUs"),
                            (missing.isEmpty() ? "" : "not listed: " + shortList(missing))
                                    + (missing.isEmpty() || extra.isEmpty() ? "" : "; ")
                                    + (extra.isEmpty() ? "" : "listed but not a healthy GPU of the node: "
                                            + shortList(extra)),
                            remedy);
                }
                GpuDevice gpu = expected.get(0).device();
                KubeletProbe.AllocateAnswer answer;
                try {
                    answer = kubelet.allocate(resource, List.of(expected.get(0).id()), bound);
                } catch (RuntimeException e) {
                    return Check.fail("kubernetes", "Allocate of GPU " + gpu.index() + " (" + gpu.uuid() + ") was"
                            + " refused", String.valueOf(e.getMessage()), remedy);
                }
                List<String> problems = allocateProblems(gpu, whole, answer);
                String found = "registered " + String.join(", ", registered) + " (API " + version + "), listed "
                        + healthy.size() + " healthy " + (gpu.isPartition() ? "partitions of " + resource : "GPUs")
                        + "; Allocate of GPU " + gpu.index() + " gave " + answer.devicePaths()
                        + " and " + new TreeSet<>(answer.envs().entrySet().stream()
                                .map(e -> e.getKey() + "=" + e.getValue()).toList());
                if (!problems.isEmpty()) {
                    return Check.fail("kubernetes", found, String.join("; ", problems), remedy);
                }
                return Check.pass("kubernetes", found + (simulated ? " (simulated node)" : ""));
            }
        } catch (Exception e) {
            return Check.fail("kubernetes", "the device plug-in could not be checked", String.valueOf(e.getMessage()),
                    remedy);
        } finally {
            if (shortDir != null) {
                deleteTree(shortDir);
            }
        }
    }

    private static String shortList(Set<String> s) {
        List<String> l = new ArrayList<>(s);
        return String.join(", ", l.size() > 8 ? l.subList(0, 8) : l) + (l.size() > 8 ? " and " + (l.size() - 8)
                + " more" : "");
    }

    /** @return what is wrong with an Allocate answer for {@code gpu}: nodes missing or too many, variables */
    static List<String> allocateProblems(GpuDevice gpu, List<GpuDevice> node, KubeletProbe.AllocateAnswer answer) {
        Set<String> paths = new TreeSet<>(answer.devicePaths());
        List<String> wanted = new ArrayList<>();
        Map<String, String> env = answer.envs();
        List<String> problems = new ArrayList<>();
        int minor = gpu.minor().orElse(-1);
        if (gpu.vendor() == GpuVendor.NVIDIA) {
            wanted.addAll(List.of("/dev/nvidia" + minor, "/dev/nvidiactl", "/dev/nvidia-uvm"));
            if (!gpu.uuid().equals(env.get("NVIDIA_VISIBLE_DEVICES"))
                    && !gpu.uuid().equals(env.get("CUDA_VISIBLE_DEVICES"))) {
                problems.add("neither NVIDIA_VISIBLE_DEVICES nor CUDA_VISIBLE_DEVICES is " + gpu.uuid());
            }
        } else {
            wanted.addAll(List.of("/dev/dri/renderD" + minor, "/dev/kfd"));
            if (gpu.uuid().startsWith("GPU-") && !gpu.uuid().equals(env.get("ROCR_VISIBLE_DEVICES"))) {
                problems.add("ROCR_VISIBLE_DEVICES is not " + gpu.uuid());
            }
        }
        for (String w : wanted) {
            if (!paths.contains(w)) {
                problems.add("no device spec for " + w);
            }
        }
        for (GpuDevice other : node) {
            if (other.minor().isPresent() && other.minor().getAsInt() != minor) {
                String p = other.vendor() == GpuVendor.NVIDIA ? "/dev/nvidia" + other.minor().getAsInt()
                        : "/dev/dri/renderD" + other.minor().getAsInt();
                if (paths.contains(p)) {
                    problems.add("a device spec for another GPU's node " + p);
                }
            }
        }
        return problems;
    }
}
