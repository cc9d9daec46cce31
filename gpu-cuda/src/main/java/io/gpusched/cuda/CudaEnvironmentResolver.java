package io.gpusched.cuda;

import io.gpusched.core.Allocation;
import io.gpusched.core.GpuDevice;
import io.gpusched.core.GpuVendor;
import io.gpusched.core.MemorySize;
import io.gpusched.core.SharingMode;
import io.gpusched.core.internal.NvidiaDriver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * Builds the environment a job needs for an {@link Allocation}: picks the newest installation that has a CUDA runtime,
 * satisfies the requirement and runs on the driver (installations without {@code libcudart} are never chosen; the
 * notes say why each newer one was passed over), and returns variables, path additions and read-only mounts. NVIDIA
 * jobs get
 * {@code CUDA_VISIBLE_DEVICES} (UUIDs by default; MIG UUIDs for MIG devices), the same {@code NVIDIA_VISIBLE_DEVICES},
 * {@code CUDA_DEVICE_ORDER=PCI_BUS_ID} and {@code CUDA_HOME}; shared allocations add MPS limits. AMD jobs get
 * {@code ROCR_VISIBLE_DEVICES} only (ROCm filters twice if CUDA_VISIBLE_DEVICES is also set). Never calls into CUDA.
 */
public final class CudaEnvironmentResolver {

    /** How {@code CUDA_VISIBLE_DEVICES} names devices. */
    public enum DeviceNaming {
        /** UUIDs: stable whatever the enumeration order (default). */
        UUIDS,
        /** Indices in PCI bus order (MIG devices are always named by UUID). */
        INDICES
    }

    private static final List<String> DRIVER_LIBRARIES =
            List.of("libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so");

    private final List<CudaInstallation> installations;
    private final CompatibilityTable table;
    private final Optional<DriverVersion> driver;
    private final Optional<CudaVersion> driverCuda;
    private final Path procRoot;
    private final List<Path> driverLibraryDirs;
    private final DeviceNaming naming;

    private CudaEnvironmentResolver(Builder b) {
        this.installations = List.copyOf(b.installations);
        this.table = b.table;
        this.driver = b.driver;
        this.driverCuda = b.driverCuda;
        this.procRoot = b.procRoot;
        this.driverLibraryDirs = List.copyOf(b.driverLibraryDirs);
        this.naming = b.naming;
    }

    /** @return a builder; by default it searches the host's standard locations */
    public static Builder builder() {
        return new Builder();
    }

    /** @return the installations this resolver chooses from, newest first */
    public List<CudaInstallation> installations() {
        return installations;
    }

    /**
     * @return the driver to judge against: the one set on the builder, else the allocation's devices', else the
     *         loaded kernel module's
     */
    Optional<DriverVersion> driverFor(Allocation a) {
        return driver.or(() -> a.devices().stream().map(GpuDevice::driverVersion).flatMap(Optional::stream)
                .filter(v -> v.matches("[0-9.]+")).findFirst().map(DriverVersion::parse))
                .or(() -> NvidiaDriver.loadedVersion(procRoot).map(DriverVersion::parse));
    }

    private Optional<CudaVersion> driverCudaFor(Allocation a) {
        return driverCuda.or(() -> a.devices().stream().map(d -> d.properties().get("cuda_driver_version"))
                .filter(Objects::nonNull).findFirst().flatMap(v -> {
                    try {
                        return Optional.of(CudaVersion.parse(v));
                    } catch (IllegalArgumentException e) {
                        return Optional.empty();
                    }
                }));
    }

    /** @return a verdict for each installation against the driver this allocation would run on */
    public Map<CudaInstallation, Compatibility> verdicts(Allocation a) {
        Map<CudaInstallation, Compatibility> out = new LinkedHashMap<>();
        for (CudaInstallation i : installations) {
            out.put(i, judge(i, a));
        }
        return out;
    }

    private Compatibility judge(CudaInstallation i, Allocation a) {
        Optional<DriverVersion> d = driverFor(a);
        if (i.version().isEmpty()) {
            return new Compatibility(Compatibility.Verdict.UNKNOWN, i.root() + " has no readable version",
                    Optional.empty(), Optional.empty());
        }
        if (d.isEmpty()) {
            return new Compatibility(Compatibility.Verdict.UNKNOWN, "no NVIDIA driver version is known (no inventory"
                    + " driver version and no /proc/driver/nvidia/version); CUDA " + i.version().get()
                    + " cannot be checked", table.minimumDriver(i.version().get()), Optional.empty());
        }
        boolean dataCenter = !a.devices().isEmpty()
                && a.devices().stream().allMatch(CudaEnvironmentResolver::isDataCenter);
        return Compatibility.judge(table, i.version().get(), d.get(), driverCudaFor(a), i.compatDir(), dataCenter);
    }

    /**
     * @return true for data-centre GPUs (forward compatibility is supported on those only); see {@link DataCenterGpus}
     */
    static boolean isDataCenter(GpuDevice d) {
        return DataCenterGpus.isDataCenter(d.name());
    }

    /**
     * Checks, before any GPU is allocated, that some CUDA installation of the node satisfies {@code requirement} (its
     * version or installation, with a CUDA runtime); whether it runs on the granted GPUs' driver is {@link #resolve}'s
     * to say.
     *
     * @throws CudaResolutionException when the requirement names CUDA and no installation satisfies it
     */
    public void checkInstalled(CudaRequirement requirement) {
        runnable(Objects.requireNonNull(requirement, "requirement"), new ArrayList<>());
    }

    /**
     * Resolves the job environment for an allocation.
     *
     * @throws CudaResolutionException when the requirement names CUDA and no installation satisfies it on this driver
     * @throws IllegalArgumentException for an allocation mixing vendors
     */
    public CudaEnvironment resolve(Allocation allocation, CudaRequirement requirement) {
        Objects.requireNonNull(allocation, "allocation");
        Objects.requireNonNull(requirement, "requirement");
        List<GpuVendor> vendors = allocation.devices().stream().map(GpuDevice::vendor).distinct().toList();
        if (vendors.size() > 1) {
            throw new IllegalArgumentException("allocation " + allocation.id() + " mixes vendors " + vendors
                    + "; one job environment cannot serve both");
        }
        if (vendors.equals(List.of(GpuVendor.AMD))) {
            return amd(allocation, requirement);
        }
        return nvidia(allocation, requirement);
    }

    private CudaEnvironment amd(Allocation a, CudaRequirement r) {
        List<String> notes = new ArrayList<>();
        if (!r.equals(CudaRequirement.NONE)) {
            notes.add("the CUDA requirement (" + r + ") does not apply to AMD GPUs and was ignored");
        }
        String ids = a.devices().stream().map(d -> d.uuid().startsWith("GPU-") ? d.uuid() : String.valueOf(d.index()))
                .collect(Collectors.joining(","));
        return new CudaEnvironment(Map.of("ROCR_VISIBLE_DEVICES", ids), Map.of(), List.of(), Optional.empty(),
                Optional.empty(), notes);
    }

    private CudaEnvironment nvidia(Allocation a, CudaRequirement r) {
        Map<String, String> vars = new LinkedHashMap<>();
        String visible = a.devices().stream()
                .map(d -> naming == DeviceNaming.INDICES && !d.isPartition() ? String.valueOf(d.index()) : d.uuid())
                .collect(Collectors.joining(","));
        vars.put("CUDA_VISIBLE_DEVICES", visible);
        vars.put("NVIDIA_VISIBLE_DEVICES", a.devices().stream().map(GpuDevice::uuid).collect(Collectors.joining(",")));
        vars.put("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        if (a.sharing() == SharingMode.SHARED) {
            MemorySize each = a.sharedMemory().orElseThrow();
            List<String> limits = new ArrayList<>();
            for (int i = 0; i < a.devices().size(); i++) {
                limits.add(i + "=" + each.toMebibytes() + "M");
            }
            vars.put("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", String.join(",", limits));
            long smallest = a.devices().stream().mapToLong(d -> d.memory().bytes()).min().orElse(each.bytes());
            long pct = smallest == 0 ? 100 : (100 * each.bytes() + smallest - 1) / smallest;
            vars.put("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", String.valueOf(Math.max(1, Math.min(100, pct))));
        }
        List<String> notes = new ArrayList<>();
        Optional<DriverVersion> driverVersion = driverFor(a);
        if (driverVersion.isEmpty()) {
            notes.add("no NVIDIA driver version is known: installations are not checked against it and no driver"
                    + " libraries are mounted");
        }
        Selection selection = choose(a, r);
        Optional<Choice> choice = selection.choice();
        notes.addAll(selection.passedOver());
        Map<String, List<String>> prepend = new LinkedHashMap<>();
        List<CudaEnvironment.Mount> mounts = new ArrayList<>();
        if (choice.isPresent()) {
            CudaInstallation i = choice.get().installation();
            Compatibility c = choice.get().compatibility();
            vars.put("CUDA_HOME", i.root().toString());
            i.nvcc().ifPresent(n -> prepend.put("PATH", List.of(n.getParent().toString())));
            List<String> libs = new ArrayList<>();
            c.forwardCompatDir().ifPresent(d -> libs.add(d.toString()));
            i.libraryDir().ifPresent(d -> libs.add(d.toString()));
            if (!libs.isEmpty()) {
                prepend.put("LD_LIBRARY_PATH", libs);
            }
            mounts.add(new CudaEnvironment.Mount(i.root(), i.root(), true));
            if (c.verdict() == Compatibility.Verdict.COMPATIBLE_MINOR_VERSION) {
                notes.add(c.message());
            }
        } else {
            notes.add("no CUDA installation found" + (installations.isEmpty() ? "" : " that fits") + "; the job must"
                    + " bring its own CUDA runtime");
        }
        driverVersion.ifPresent(v -> mounts.addAll(driverLibraries(v)));
        return new CudaEnvironment(vars, prepend, mounts, choice.map(Choice::installation),
                choice.map(Choice::compatibility), notes);
    }

    private record Choice(CudaInstallation installation, Compatibility compatibility) {
    }

    /** The chosen installation, if any, and a sentence for each installation that was passed over and why. */
    private record Selection(Optional<Choice> choice, List<String> passedOver) {
    }

    /**
     * Only installations that have a CUDA runtime ({@code libcudart}) can run a job: one without (a headers-only
     * leftover, a bare {@code nvcc}) is never handed out, whatever its version, and is named in the notes with the
     * reason. Among the rest, the best verdict wins, then the newest version.
     */
    /**
     * @param passedOver receives a sentence for each satisfying installation passed over (no runtime)
     * @return the installations that satisfy {@code r} and can run a job (a runtime), newest first as found
     * @throws CudaResolutionException when CUDA is asked for and none does
     */
    private List<CudaInstallation> runnable(CudaRequirement r, List<String> passedOver) {
        List<CudaInstallation> satisfying = new ArrayList<>();
        for (CudaInstallation i : installations) {
            if (r.installation().isPresent() && !i.isAt(r.installation().get())) {
                continue;
            }
            if (i.version().map(r::accepts).orElse(r.minimum().isEmpty() && r.exact().isEmpty())) {
                satisfying.add(i);
            }
        }
        List<CudaInstallation> pool = new ArrayList<>();
        for (CudaInstallation i : satisfying) {
            if (i.hasRuntime()) {
                pool.add(i);
            } else {
                passedOver.add("passed over " + i.root() + " (CUDA " + CudaInstallations.describe(i) + "): it has no"
                        + " CUDA runtime (no libcudart" + (i.nvcc().isPresent() ? "" : ", no nvcc")
                        + "), so it cannot run a job (a headers-only or partial installation)");
            }
        }
        if (pool.isEmpty() && !r.equals(CudaRequirement.NONE)) {
            throw new CudaResolutionException("no CUDA installation satisfies " + r + "; found "
                    + (installations.isEmpty() ? "none" : installations.stream()
                            .map(i -> i.root() + " (" + CudaInstallations.describe(i)
                                    + (i.hasRuntime() ? "" : ", no runtime")
                                    + ")")
                            .collect(Collectors.joining(", ")))
                    + (passedOver.isEmpty() ? "" : "; " + String.join("; ", passedOver))
                    + ". Install it, or add its path to gpu.cuda_paths.");
        }
        return pool;
    }

    private Selection choose(Allocation a, CudaRequirement r) {
        List<String> passedOver = new ArrayList<>();
        List<CudaInstallation> pool = runnable(r, passedOver);
        boolean asked = !r.equals(CudaRequirement.NONE);
        if (pool.isEmpty()) {
            return new Selection(Optional.empty(), passedOver);
        }
        Choice best = null;
        Map<CudaInstallation, Compatibility> verdicts = new LinkedHashMap<>();
        for (CudaInstallation i : pool) {
            Compatibility c = judge(i, a);
            verdicts.put(i, c);
            if (best == null || rank(c) < rank(best.compatibility())) {
                best = new Choice(i, c);
            }
        }
        if (best.compatibility().verdict() == Compatibility.Verdict.INCOMPATIBLE) {
            if (!asked) {
                return new Selection(Optional.empty(), passedOver);
            }
            throw new CudaResolutionException("no CUDA installation satisfying " + r + " runs on this driver: "
                    + pool.stream().map(i -> i.root() + ": " + verdicts.get(i).message())
                            .collect(Collectors.joining("; "))
                    + (passedOver.isEmpty() ? "" : "; " + String.join("; ", passedOver)));
        }
        // installations listed before the chosen one are newer: say why they lost
        for (CudaInstallation i : pool) {
            if (i == best.installation()) {
                break;
            }
            passedOver.add("passed over " + i.root() + " (CUDA " + CudaInstallations.describe(i) + "): "
                    + verdicts.get(i).verdict() + ": " + verdicts.get(i).message());
        }
        return new Selection(Optional.of(best), passedOver);
    }

    /** Pool is newest first, so the first of the best verdict is the newest such installation. */
    private static int rank(Compatibility c) {
        return switch (c.verdict()) {
            case COMPATIBLE -> 0;
            case COMPATIBLE_MINOR_VERSION -> 1;
            case NEEDS_FORWARD_COMPAT -> 2;
            case UNKNOWN -> 3;
            case INCOMPATIBLE -> 4;
        };
    }

    /**
     * Read-only mounts of the driver's user-space libraries for a driver version ({@code libcuda.so.<version>} and a
     * {@code .so.1} that resolves to it, in the driver library directories), for container specs that are written
     * before any allocation (CDI).
     *
     * @param driverVersion the kernel driver's version, e.g. {@code 535.183.01}
     * @return the mounts; empty when the version does not parse or the host has none of the libraries
     */
    public List<CudaEnvironment.Mount> driverLibraryMounts(String driverVersion) {
        try {
            return driverLibraries(DriverVersion.parse(driverVersion));
        } catch (IllegalArgumentException e) {
            return List.of();
        }
    }

    /**
     * Driver user-space libraries of the running driver version ({@code libcuda.so.580.65.06} and its {@code .so.1}).
     */
    private List<CudaEnvironment.Mount> driverLibraries(DriverVersion v) {
        List<CudaEnvironment.Mount> out = new ArrayList<>();
        for (Path dir : driverLibraryDirs) {
            for (String lib : DRIVER_LIBRARIES) {
                Path versioned = dir.resolve(lib + "." + v);
                Path soname = dir.resolve(lib + ".1");
                if (Files.exists(versioned)) {
                    add(out, versioned);
                }
                if (Files.exists(soname) && resolvesTo(soname, lib + "." + v)) {
                    add(out, soname);
                }
            }
        }
        return out;
    }

    private static void add(List<CudaEnvironment.Mount> out, Path p) {
        if (out.stream().noneMatch(m -> m.source().equals(p))) {
            out.add(new CudaEnvironment.Mount(p, p, true));
        }
    }

    /** A {@code .so.1} is mounted only when it is the running driver's library, never another version's. */
    private static boolean resolvesTo(Path soname, String fileName) {
        try {
            return soname.toRealPath().getFileName().toString().equals(fileName);
        } catch (IOException e) {
            return false;
        }
    }

    /** Builds a {@link CudaEnvironmentResolver}. */
    public static final class Builder {
        private List<CudaInstallation> installations;
        private CompatibilityTable table = CompatibilityTable.builtIn();
        private Optional<DriverVersion> driver = Optional.empty();
        private Optional<CudaVersion> driverCuda = Optional.empty();
        private Path procRoot = Path.of("/proc");
        private List<Path> driverLibraryDirs = List.of(Path.of("/usr/lib/x86_64-linux-gnu"),
                Path.of("/usr/lib/x86_64-linux-gnu/nvidia/current"), Path.of("/usr/lib64"),
                Path.of("/usr/lib/aarch64-linux-gnu"));
        private DeviceNaming naming = DeviceNaming.UUIDS;

        private Builder() {
        }

        /**
         * @param v installations to choose from (default: {@link CudaInstallations#discover} of the host) @return this
         */
        public Builder installations(List<CudaInstallation> v) {
            installations = List.copyOf(v);
            return this;
        }

        /** @param search where to look @return this */
        public Builder search(CudaSearch search) {
            installations = CudaInstallations.discover(search).installations();
            return this;
        }

        /** @param v the driver table (default: the built-in one) @return this */
        public Builder table(CompatibilityTable v) {
            table = Objects.requireNonNull(v, "table");
            return this;
        }

        /**
         * @param version    the host driver (default: the allocation's devices', else /proc/driver/nvidia/version)
         * @param cudaVersion the CUDA version the driver reports, if known
         * @return this
         */
        public Builder driver(DriverVersion version, Optional<CudaVersion> cudaVersion) {
            driver = Optional.of(version);
            driverCuda = Objects.requireNonNull(cudaVersion, "cudaVersion");
            return this;
        }

        /** @param v root of procfs, for the driver version fallback @return this */
        public Builder procRoot(Path v) {
            procRoot = Objects.requireNonNull(v, "procRoot");
            return this;
        }

        /** @param v directories holding the driver's user-space libraries @return this */
        public Builder driverLibraryDirs(List<Path> v) {
            driverLibraryDirs = List.copyOf(v);
            return this;
        }

        /** @param v how CUDA_VISIBLE_DEVICES names devices (default UUIDs) @return this */
        public Builder deviceNaming(DeviceNaming v) {
            naming = Objects.requireNonNull(v, "naming");
            return this;
        }

        /** @return the resolver */
        public CudaEnvironmentResolver build() {
            if (installations == null) {
                installations = CudaInstallations.discover(CudaSearch.host(List.of())).installations();
            }
            return new CudaEnvironmentResolver(this);
        }
    }
}
