package io.gpusched.server;

import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.devices.CharMajors;
import io.gpusched.core.internal.NvidiaDriver;
import io.gpusched.cuda.Compatibility;
import io.gpusched.cuda.CompatibilityTable;
import io.gpusched.cuda.CudaInstallation;
import io.gpusched.cuda.CudaInstallations;
import io.gpusched.cuda.CudaSearch;
import io.gpusched.cuda.DriverVersion;
import io.gpusched.isolation.CgroupDeviceIsolator;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * What works on this host and what does not: the inventory providers with their causes and advice, the isolation
 * mechanism, and the CUDA installations with their driver verdicts. {@code gpusched doctor} prints it; the console
 * serves it at {@code /api/v1/doctor}. For a simulated node, {@code node} says so and the CUDA verdicts are judged
 * against the simulated GPUs' driver; the providers are still the host's (which the simulated node does not use) and
 * isolation is the host's (what {@code gpusched run} fences with on any node).
 *
 * @param node          the node served, when one was given: simulated or not, its backend, GPUs and driver; null
 *                      when only the host was looked at
 * @param providers     inventory providers, highest priority first
 * @param isolation     the isolation mechanism
 * @param driver        the NVIDIA driver version the CUDA verdicts are judged against (the loaded one; a simulated
 *                      node's own), or null
 * @param cuda          CUDA installations found
 * @param cudaProblems  problems met while looking for CUDA
 * @param uvm           NVIDIA's unified-memory module, which every CUDA program needs
 */
public record DoctorReport(Node node, List<Provider> providers, Isolation isolation, String driver,
        List<Cuda> cuda, List<String> cudaProblems, Uvm uvm) {

    /**
     * NVIDIA's unified-memory module ({@code nvidia-uvm}), loaded on demand on many distributions: without it a CUDA
     * program cannot initialise, on the host or in a container.
     *
     * @param checked whether an NVIDIA driver is loaded here (else nothing is said)
     * @param major   the module's major in {@code /proc/devices}, or null when it is not loaded
     * @param missing its device nodes missing from {@code /dev}
     * @param problem what is wrong and what it means, or null
     * @param advice  what to do, or null
     */
    public record Uvm(boolean checked, Integer major, List<String> missing, String problem, String advice) {
        /** Copies the list. */
        public Uvm {
            missing = List.copyOf(missing);
        }

        /**
         * @param procRoot where {@code /proc} is ({@code gpusched.proc.root})
         * @param devRoot  where {@code /dev} is ({@code gpusched.dev.root})
         * @return the module's state here, from {@code /proc/devices} and {@code /dev} read now
         */
        public static Uvm look(Path procRoot, Path devRoot) {
            CharMajors majors = CharMajors.read(procRoot);
            boolean nvidia = NvidiaDriver.loadedVersion(procRoot).isPresent()
                    || majors.major("nvidia").isPresent() || majors.major("nvidia-frontend").isPresent();
            if (!nvidia) {
                return new Uvm(false, null, List.of(), null, null);
            }
            List<String> missing = new ArrayList<>();
            for (String n : List.of("nvidia-uvm", "nvidia-uvm-tools")) {
                if (!Files.exists(devRoot.resolve(n))) {
                    missing.add("/dev/" + n);
                }
            }
            OptionalInt major = majors.major("nvidia-uvm");
            String load = "as root: nvidia-modprobe -u -c=0 (loads nvidia-uvm and makes /dev/nvidia-uvm and"
                    + " /dev/nvidia-uvm-tools; or modprobe nvidia-uvm at boot, with its nodes made by udev or mknod);"
                    + " gpusched run loads it itself before it fences where nvidia-modprobe is installed";
            if (major.isEmpty()) {
                return new Uvm(true, null, missing, "nvidia-uvm is not loaded (not in " + procRoot.resolve("devices")
                        + "): a CUDA program cannot initialise without it (cuInit fails), on the host or in a"
                        + " container; CDI specs and the device plug-in still name /dev/nvidia-uvm and"
                        + " /dev/nvidia-uvm-tools by path, so a container runtime refuses to start a GPU container"
                        + " until they exist", load);
            }
            if (!missing.isEmpty()) {
                return new Uvm(true, major.getAsInt(), missing, "nvidia-uvm is loaded (major " + major.getAsInt()
                        + ") but " + String.join(" and ", missing) + " " + (missing.size() == 1 ? "is" : "are")
                        + " missing: containers given the nodes by path fail to start, and CUDA on the host cannot"
                        + " open them", load);
            }
            // present is not enough: a directory left by a bind mount, or a node of another major, opens nothing
            List<String> wrong = new ArrayList<>();
            int minor = 0;
            for (String n : List.of("nvidia-uvm", "nvidia-uvm-tools")) {
                String what = charDevice(devRoot.resolve(n), major.getAsInt(), minor++);
                if (what != null) {
                    wrong.add("/dev/" + n + " " + what);
                }
            }
            if (!wrong.isEmpty()) {
                return new Uvm(true, major.getAsInt(), List.of(), "nvidia-uvm is loaded (major " + major.getAsInt()
                        + ") but " + String.join(" and ", wrong) + ": CUDA cannot open " + (wrong.size() == 1 ? "it"
                                : "them")
                        + ", on the host or in a container given the node by path",
                        "as root: remove " + (wrong.size() == 1 ? "it" : "them") + " and run nvidia-modprobe -u -c=0"
                                + " (or mknod /dev/nvidia-uvm c " + major.getAsInt() + " 0, /dev/nvidia-uvm-tools c "
                                + major.getAsInt() + " 1)");
            }
            return new Uvm(true, major.getAsInt(), List.of(), null, null);
        }

        /** @return null when {@code p} is the character device {@code major:minor}, else what it is instead */
        private static String charDevice(Path p, int major, int minor) {
            try {
                Map<String, Object> a = Files.readAttributes(p, "unix:mode,rdev", LinkOption.NOFOLLOW_LINKS);
                int mode = (Integer) a.get("mode");
                if ((mode & 0170000) != 0020000) {
                    return (mode & 0170000) == 0040000 ? "is a directory, not a character device"
                            : "is not a character device";
                }
                long rdev = (Long) a.get("rdev");
                long maj = ((rdev >>> 8) & 0xfff) | ((rdev >>> 32) & ~0xfffL);
                long min = (rdev & 0xff) | ((rdev >>> 12) & ~0xffL);
                if (maj != major || min != minor) {
                    return "is c " + maj + ":" + min + ", not c " + major + ":" + minor;
                }
                return null;
            } catch (IOException | UnsupportedOperationException | IllegalArgumentException | ClassCastException e) {
                return null; // cannot tell (not a Unix file system view): say nothing rather than guess
            }
        }
    }

    /**
     * The node a command or the console serves.
     *
     * @param backend   its inventory backend ({@code simulated:dgx1-v100}, {@code nvml})
     * @param simulated whether it is a simulated node (the host's GPUs and providers are then not used)
     * @param gpus      how many GPUs it has
     * @param driver    its GPUs' driver version as the inventory reports it, or null
     */
    public record Node(String backend, boolean simulated, int gpus, String driver) {
    }

    /**
     * One inventory provider.
     *
     * @param name      provider name
     * @param priority  priority
     * @param available whether it works here
     * @param cause     why not, or null
     * @param advice    what to do about it, or null
     */
    public record Provider(String name, int priority, boolean available, String cause, String advice) {
    }

    /**
     * The cgroup device isolation available here.
     *
     * @param v1Root      the cgroup v1 devices hierarchy, or null
     * @param v2Root      the cgroup2 mount, or null
     * @param available   whether jobs can be fenced
     * @param mechanism   "v2 eBPF" or "v1" when available, else null
     * @param cause       why not, or null
     */
    public record Isolation(String v1Root, String v2Root, boolean available, String mechanism, String cause) {
    }

    /**
     * One CUDA installation.
     *
     * @param root          its directory
     * @param aliases       other paths that lead to it
     * @param version       its version, or null
     * @param versionSource where the version came from, or null
     * @param runtime       whether it has the runtime library
     * @param nvcc          whether it has nvcc
     * @param verdict       compatibility with the loaded driver, or why it cannot be judged
     */
    public record Cuda(String root, List<String> aliases, String version, String versionSource, boolean runtime,
            boolean nvcc, String verdict) {
    }

    /**
     * Looks at this host, with {@code /proc} and {@code /dev} where the system properties {@code gpusched.proc.root}
     * and {@code gpusched.dev.root} say (default {@code /proc}, {@code /dev}).
     *
     * @param extraCudaPaths more places to look for CUDA (gpu.cuda_paths)
     * @return the report
     */
    public static DoctorReport collect(List<Path> extraCudaPaths) {
        return collect(extraCudaPaths, null);
    }

    /**
     * Looks at this host and the node served on it.
     *
     * @param extraCudaPaths more places to look for CUDA (gpu.cuda_paths)
     * @param inventory      the node's inventory, or null for the host alone
     * @return the report: for a simulated node, CUDA judged against its GPUs' driver
     */
    public static DoctorReport collect(List<Path> extraCudaPaths, GpuInventory inventory) {
        return collect(extraCudaPaths, inventory, Path.of(System.getProperty("gpusched.proc.root", "/proc")),
                Path.of(System.getProperty("gpusched.dev.root", "/dev")));
    }

    /**
     * Looks at this host alone, with {@code /proc} and {@code /dev} where given.
     *
     * @param extraCudaPaths more places to look for CUDA (gpu.cuda_paths)
     * @param procRoot       where {@code /proc} is
     * @param devRoot        where {@code /dev} is
     * @return the report
     */
    public static DoctorReport collect(List<Path> extraCudaPaths, Path procRoot, Path devRoot) {
        return collect(extraCudaPaths, null, procRoot, devRoot);
    }

    /**
     * Looks at this host and the node served on it, with {@code /proc} and {@code /dev} where given.
     *
     * @param extraCudaPaths more places to look for CUDA (gpu.cuda_paths)
     * @param inventory      the node's inventory, or null for the host alone
     * @param procRoot       where {@code /proc} is
     * @param devRoot        where {@code /dev} is
     * @return the report: for a simulated node, CUDA judged against its GPUs' driver
     */
    public static DoctorReport collect(List<Path> extraCudaPaths, GpuInventory inventory, Path procRoot,
            Path devRoot) {
        Node node = inventory == null ? null : new Node(inventory.backend(),
                inventory.backend().startsWith("simulated:"), inventory.devices().size(),
                inventory.devices().stream().map(GpuDevice::driverVersion).flatMap(Optional::stream).findFirst()
                        .orElse(null));
        List<Provider> providers = new ArrayList<>();
        for (GpuInventories.ProviderStatus p : GpuInventories.providers()) {
            providers.add(new Provider(p.name(), p.priority(), p.available(), p.cause().orElse(null),
                    p.cause().flatMap(DoctorReport::advice).orElse(null)));
        }
        CgroupDeviceIsolator iso = CgroupDeviceIsolator.detect(List.<GpuDevice>of());
        Isolation isolation = new Isolation(iso.v1Root().map(Path::toString).orElse(null),
                iso.v2Root().map(Path::toString).orElse(null), iso.isAvailable(),
                iso.isAvailable() ? (iso.v2Root().isPresent() ? "v2 eBPF" : "v1") : null,
                iso.unavailabilityCause().orElse(null));
        CudaInstallations.Discovery d = CudaInstallations.discover(CudaSearch.host(extraCudaPaths));
        Optional<DriverVersion> driver = node != null && node.simulated()
                ? Optional.ofNullable(node.driver()).map(DriverVersion::parse)
                : NvidiaDriver.loadedVersion(procRoot).map(DriverVersion::parse);
        CompatibilityTable table = CompatibilityTable.builtIn();
        List<Cuda> cuda = new ArrayList<>();
        for (CudaInstallation i : d.installations()) {
            String verdict = i.version().map(v -> driver.map(dv -> {
                Compatibility c = Compatibility.judge(table, v, dv, Optional.empty(), i.compatDir(), true);
                return c.verdict() + ": " + c.message();
            }).orElse(node != null && node.simulated() ? "the simulated node names no NVIDIA driver, so it cannot be"
                    + " checked" : "no NVIDIA driver is loaded, so it cannot be checked")).orElse("version unknown");
            cuda.add(new Cuda(i.root().toString(), i.aliases().stream().map(Object::toString).toList(),
                    i.version().map(Object::toString).orElse(null), i.versionSource().map(Enum::name).orElse(null),
                    i.hasRuntime(), i.nvcc().isPresent(), verdict));
        }
        return new DoctorReport(node, providers, isolation, driver.map(Object::toString).orElse(null), cuda,
                d.problems().stream().map(Object::toString).toList(), Uvm.look(procRoot, devRoot));
    }

    /**
     * @param cause a provider's cause
     * @return what to do about it, when known
     */
    public static Optional<String> advice(String cause) {
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
